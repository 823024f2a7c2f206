// End to end through the trainer binary: a short run on real DSB 2018 images
// (the embedded sample) in which the loss falls and checkpoints appear; exit
// codes and messages for bad flags and configs.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "backend/cpu_info.h"
#include "backend/gpu_info.h"
#include "config/config.h"
#include "core/build_id.h"
#include "io/checkpoint.h"
#include "process_testing.h"

namespace fs = std::filesystem;
using namespace trainer::testing;

namespace {


// The sample U-Net for 4 epochs, keeping the best checkpoint by val_loss.
std::string small_unet(const fs::path& out_dir) {
  return trainer::testing::sample_unet_config(out_dir, R"(  epochs: 4
  batch_size: 4
  loss: binary_crossentropy
  metrics: [mean_iou]
  callbacks:
    - {type: ModelCheckpoint, filepath: "best-{epoch:02d}.h5", monitor: val_loss, save_best_only: true}
)");
}

std::vector<double> epoch_losses(const std::string& out) {
  std::vector<double> losses;
  std::regex re(R"(Epoch \d+/\d+ .* - loss: ([0-9.]+))");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    losses.push_back(std::stod((*it)[1]));
  return losses;
}

}  // namespace

TEST_CASE("training on real images lowers the loss and writes checkpoints", "[e2e]") {
  fs::path dir = temp_dir("e2e_train");
  std::ofstream(dir / "unet.yaml") << small_unet(dir / "run");
  Run r = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu:2", dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("Total params:"));
  std::vector<double> losses = epoch_losses(r.out);
  REQUIRE(losses.size() == 4);
  CHECK(losses.back() < losses.front());
  CHECK(fs::exists(dir / "run" / "final.h5"));
  CHECK(fs::exists(dir / "run" / "best-01.h5"));
  for (auto& e : fs::directory_iterator(dir / "run"))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
  fs::remove_all(dir);
}

// The second run goes into the first one's folder: refused (nothing touched,
// nothing printed before the error) until --overwrite. It also asks for bf16, which CPU towers do not do: a
// warning says so and the losses stay fp32's. The default (tf32) warns not.
TEST_CASE("a read-only output folder is refused before the first step", "[e2e]") {
  // A folder without write permission failed at the first epoch's log.csv, after the epoch.
  TempDir dir("e2e_read_only");
  fs::create_directories(dir.root / "ro");
  fs::permissions(dir.root / "ro", fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                       fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  std::ofstream(dir.root / "unet.yaml") << small_unet(dir.root / "ro");
  std::string as_user;  // root writes anywhere: run as nobody
  if (::geteuid() == 0) {
    if (run("/bin/sh", "-c 'command -v setpriv'", dir.root).code != 0) {
      WARN("skipped: running as root without setpriv to run as another user");
      return;
    }
    as_user = "--reuid=65534 --regid=65534 --clear-groups " TRAINER_BINARY " ";
  }
  const std::string args = "--config " + (dir.root / "unet.yaml").string() + " --gpus cpu --epochs 1";
  const Run r = as_user.empty() ? run_trainer(args, dir.root) : run("setpriv", as_user + args, dir.root);
  INFO(r.out << r.err);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("error: cannot write in the output folder '" + (dir.root / "ro").string() +
                                    "': Permission denied; make it writable, or set training.output_dir or --output "
                                    "to a writable folder"));
  CHECK_THAT(r.out, !Catch::Contains("Epoch 1/1"));
  CHECK(fs::is_empty(dir.root / "ro"));
  // A folder to be made is probed where it would be made.
  std::ofstream(dir.root / "deeper.yaml") << small_unet(dir.root / "ro" / "a" / "b");
  const std::string deeper = "--config " + (dir.root / "deeper.yaml").string() + " --gpus cpu --epochs 1";
  const Run d = as_user.empty() ? run_trainer(deeper, dir.root) : run("setpriv", as_user + deeper, dir.root);
  CHECK(d.code == 2);
  CHECK_THAT(d.err, Catch::Contains("cannot create the output folder '" + (dir.root / "ro" / "a" / "b").string() +
                                    "' in '" + (dir.root / "ro").string() + "': Permission denied"));
}

TEST_CASE("gpus flag: cpu and cpu:2 give the same losses", "[e2e][multitower]") {
  fs::path dir = temp_dir("e2e_towers");
  std::ofstream(dir / "unet.yaml") << small_unet(dir / "run");
  std::string cfg = "--config " + (dir / "unet.yaml").string() + " --epochs 2";
  Run one = run_trainer(cfg + " --gpus cpu", dir);
  REQUIRE(one.code == 0);
  const std::string last = slurp(dir / "run" / "last.h5"), best = slurp(dir / "run" / "best-01.h5");
  REQUIRE(!last.empty());
  Run refused = run_trainer(cfg + " --gpus cpu:2", dir);
  CHECK(refused.code == 2);
  CHECK_THAT(refused.err, Catch::Contains("holds an earlier run (last.h5, log.csv, final.h5, best-01.h5") &&
                              Catch::Contains("--resume " + (dir / "run" / "last.h5").string()) &&
                              Catch::Contains("--overwrite"));
  CHECK_THAT(refused.out, !Catch::Contains("Total params"));  // refused before the model summary
  CHECK(slurp(dir / "run" / "last.h5") == last);
  CHECK(slurp(dir / "run" / "best-01.h5") == best);
  // A temporary file of a process killed while writing is removed; one of a live process is not its to remove.
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  REQUIRE(dead > 0);
  REQUIRE(waitpid(dead, nullptr, 0) == dead);
  const fs::path left = dir / "run" / ("last.h5.tmp-" + std::to_string(dead));
  const fs::path live = dir / "run" / ("log.csv.tmp-" + std::to_string(getpid()));
  std::ofstream(left) << "half a checkpoint";
  std::ofstream(live) << "being written";
  Run two = run_trainer(cfg + " --gpus cpu:2 --precision bf16 --overwrite", dir);
  REQUIRE(two.code == 0);
  // bf16 CPU towers say what they compute in (or, on a CPU without bf16 arithmetic, that they cannot).
  const std::string said = trainer::cpu_has_bf16() ? "CPU towers: convolutions in bf16" : "neither AVX512-BF16 nor AMX";
  CHECK_THAT(one.err, !Catch::Contains("CPU towers: convolutions"));
  CHECK_THAT(two.err, Catch::Contains(said));
  // The earlier run's final.h5 and last.h5 go when the new run starts (a stopped run left
  // them beside its own files, and predict took final.h5). (--initial-weights from the output folder is
  // refused: nothing read goes.)
  CHECK_THAT(one.err, !Catch::Contains("removed the earlier run's"));
  CHECK_THAT(two.err, Catch::Contains("removed the earlier run's final.h5, last.h5 from " + (dir / "run").string() +
                                      ": this run writes its own"));
  CHECK_FALSE(fs::exists(left));
  CHECK_THAT(two.err, Catch::Contains("removed 1 temporary file(s) left by a run killed while writing: " +
                                      left.string()));
  CHECK(fs::exists(live));
  std::vector<double> a = epoch_losses(one.out), b = epoch_losses(two.out);
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  for (size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).margin(2e-4));
  fs::remove_all(dir);
}

TEST_CASE("the default --gpus all falls back to the CPU with an info line, an explicit --gpus all warns", "[e2e]") {
  if (!trainer::list_gpus().empty()) {
    WARN("skipped: this machine has a GPU, so --gpus all does not fall back to the CPU");
    return;
  }
  fs::path dir = temp_dir("e2e_default_gpus");
  std::ofstream(dir / "unet.yaml") << small_unet(dir / "run");
  const std::string cfg = "--config " + (dir / "unet.yaml").string() + " --epochs 1 --overwrite";
  const Run quiet = run_trainer(cfg, dir), loud = run_trainer(cfg + " --gpus all", dir);
  INFO(quiet.err << loud.err);
  REQUIRE(quiet.code == 0);
  REQUIRE(loud.code == 0);
  CHECK_THAT(quiet.err, Catch::Contains("info: no GPU found; running on the CPU") && !Catch::Contains("warning"));
  CHECK_THAT(loud.err, Catch::Contains("warning: --gpus all: no GPU found; running on the CPU"));
  fs::remove_all(dir);
}

TEST_CASE("BinaryFocalCrossentropy's alpha without apply_class_balancing draws a warning", "[e2e][focal]") {
  fs::path dir = temp_dir("e2e_focal_alpha");
  for (const bool balanced : {false, true}) {
    const std::string loss = std::string("{type: BinaryFocalCrossentropy, alpha: 0.75") +
                             (balanced ? ", apply_class_balancing: true}" : "}");
    std::ofstream(dir / "unet.yaml") << sample_unet_config(dir / "run", "  epochs: 1\n  loss: " + loss + "\n");
    const Run r = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu --overwrite", dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto warned = Catch::Contains("alpha 0.75 weighs nothing without apply_class_balancing: true");
    if (balanced)
      CHECK_THAT(r.err, !warned);
    else
      CHECK_THAT(r.err, warned);
  }
  fs::remove_all(dir);
}

TEST_CASE("a callback's mode against its monitor (max on a loss) draws a warning", "[e2e][callbacks]") {
  fs::path dir = temp_dir("e2e_mode_warning");
  std::ofstream(dir / "unet.yaml") << sample_unet_config(
      dir / "run", "  epochs: 1\n  metrics: [dice]\n  callbacks:\n"
                   "    - {type: EarlyStopping, monitor: val_loss, mode: max, patience: 3}\n"
                   "    - {type: ModelCheckpoint, filepath: best.h5, save_best_only: true, monitor: val_dice, mode: min}\n"
                   "    - {type: ReduceLROnPlateau, monitor: val_dice, mode: max}\n");
  const Run r = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu", dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  // At the mode's place in the config (the callbacks are lines 24 to 26).
  CHECK_THAT(r.err, Catch::Contains("unet.yaml:24:54: training.callbacks[0] (EarlyStopping): mode max on val_loss takes "
                                    "the largest val_loss as the best, the worst one; use mode min (or auto)") &&
                        Catch::Contains("unet.yaml:25:97: training.callbacks[1] (ModelCheckpoint): mode min on val_dice "
                                        "takes the smallest") &&
                        !Catch::Contains("(ReduceLROnPlateau): mode"));
  fs::remove_all(dir);
}

TEST_CASE("an epoch whose checkpoints cannot be written leaves no log row and no epoch line (ulimit -f)", "[e2e]") {
  // From a batch-job trial: the row and the epoch's line came before last.h5, so a full disk (or a kill between
  // them) left log.csv an epoch ahead of last.h5, and a resume took the run for one going back. prlimit gives a
  // file-size limit between log.csv's size and the checkpoint's; SIGXFSZ is ignored, so the write fails cleanly.
  fs::path dir = temp_dir("e2e_fsize");
  std::ofstream(dir / "unet.yaml") << small_unet(dir / "run");
  const Run r = run("prlimit --fsize=40000 " + std::string(TRAINER_BINARY),
                    "--config " + (dir / "unet.yaml").string() + " --gpus cpu --epochs 2", dir);
  INFO(r.out << r.err);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("error: cannot write checkpoint") && Catch::Contains("File too large"));
  CHECK_FALSE(fs::exists(dir / "run" / "log.csv"));
  CHECK_FALSE(fs::exists(dir / "run" / "last.h5"));
  CHECK_THAT(r.out, !Catch::Contains("Epoch 1/2"));
  for (const auto& e : fs::directory_iterator(dir / "run"))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("log-format json prints only JSON objects on stdout, and log.csv has Keras's columns", "[e2e]") {
  fs::path dir = temp_dir("e2e_json");
  std::ofstream(dir / "unet.yaml") << small_unet(dir / "run");
  Run r = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu --epochs 2 --log-format json", dir);
  REQUIRE(r.code == 0);
  std::istringstream lines(r.out);
  std::vector<std::string> all;
  for (std::string line; std::getline(lines, line);) all.push_back(line);
  REQUIRE(all.size() == 3);
  for (const auto& line : all) CHECK((line.front() == '{' && line.back() == '}'));
  CHECK_THAT(all[0], Catch::Contains("\"epoch\": 1, \"epochs\": 2") && Catch::Contains("\"val_mean_iou\": "));
  CHECK_THAT(all[2], Catch::Contains("{\"done\": true, \"epochs_run\": 2,") && Catch::Contains("final.h5\"]}"));
  CHECK_THAT(r.err, Catch::Contains("Total params:"));  // the summary moved to stderr
  std::ifstream csv(dir / "run" / "log.csv");
  std::string header, row1, row2;
  std::getline(csv, header), std::getline(csv, row1), std::getline(csv, row2);
  CHECK(header == "epoch,loss,mean_iou,val_loss,val_mean_iou");
  CHECK(row1.rfind("0,", 0) == 0);  // Keras numbers CSV epochs from 0
  CHECK(row2.rfind("1,", 0) == 0);
  // A failed run still ends stdout with one object (a config error printed nothing there).
  std::ofstream(dir / "bad.yaml") << "model:\n  layers:\n    - {type: Input, shape: [8, 8, 1]}\n"
                                     "data: {images: a, masks: b}\ntraining: {epoch: 3}\n";
  r = run_trainer("--config " + (dir / "bad.yaml").string() + " --gpus cpu --log-format json", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::StartsWith("{\"done\": false, \"error\": \"") &&
                        Catch::Contains("bad.yaml:5:") && Catch::Contains("did you mean 'epochs'"));
  CHECK_THAT(r.out, Catch::EndsWith("\"}\n"));
  CHECK_THAT(r.err, Catch::Contains("did you mean 'epochs'"));
  fs::remove_all(dir);
}

TEST_CASE("initial_epoch and validation_freq number and validate epochs as Keras's fit() does", "[e2e][callbacks]") {
  fs::path dir = temp_dir("e2e_validation_freq");
  std::ofstream(dir / "unet.yaml") << trainer::testing::sample_unet_config(dir / "run", R"(  epochs: 5
  initial_epoch: 2
  validation_freq: 2
  batch_size: 4
  loss: binary_crossentropy
  metrics: [mean_iou]
  callbacks:
    - {type: ModelCheckpoint, filepath: "best-{epoch:02d}.h5", monitor: val_loss, save_best_only: true}
    - {type: EarlyStopping, monitor: val_loss, patience: 1}
)");
  const Run r = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu", dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out + r.err, Catch::Contains("starting at epoch 3 of 5 (training.initial_epoch 2)") &&
                                Catch::Contains("Epoch 3/5") && !Catch::Contains("Epoch 2/5") &&
                                Catch::Contains("EarlyStopping watches val_loss after the epochs that validate"));
  // Epochs 3, 4 and 5 ran; only epoch 4 (4 % 2 == 0) validated, so only it could be the best.
  std::ifstream csv(dir / "run" / "log.csv");
  std::vector<std::string> rows;
  for (std::string line; std::getline(csv, line);) rows.push_back(line);
  REQUIRE(rows.size() == 4);
  CHECK(rows[0] == "epoch,loss,mean_iou,val_loss,val_mean_iou");
  CHECK_THAT(rows[1], Catch::StartsWith("2,") && Catch::EndsWith(",NA,NA"));
  CHECK_THAT(rows[2], Catch::StartsWith("3,") && !Catch::Contains("NA"));
  CHECK_THAT(rows[3], Catch::StartsWith("4,") && Catch::EndsWith(",NA,NA"));
  CHECK(fs::exists(dir / "run" / "best-04.h5"));
  CHECK_FALSE(fs::exists(dir / "run" / "best-03.h5"));
  CHECK_FALSE(fs::exists(dir / "run" / "best-05.h5"));
  CHECK(trainer::load_checkpoint((dir / "run" / "final.h5").string()).epoch == 5);
  fs::remove_all(dir);
}

TEST_CASE("a layer that does not lead to the output is named in a warning", "[e2e]") {
  fs::path dir = temp_dir("e2e_unreached");
  std::string text = trainer::testing::sample_unet_config(dir / "run", "  epochs: 1\n  batch_size: 8\n");
  const std::string out = "    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}";
  REQUIRE(text.find(out) != std::string::npos);
  text.replace(text.find(out), out.size(),
               "    - {name: dead, type: Conv2D, filters: 2, kernel_size: 1, inputs: [c1]}\n"
               "    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid, inputs: [c3]}");
  std::ofstream(dir / "unet.yaml") << text;
  const Run r = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu", dir);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("layer(s) dead do not lead to the output (the last layer)"));
  fs::remove_all(dir);
}

// The stop is recomputed here with Keras 3's on_epoch_end, in Keras's 0-based
// epochs, from the losses the run logged: a training loss watched in max mode
// with a baseline it cannot beat (every watched epoch adds to the wait, an
// improving one never stops), the first epoch not watched.
TEST_CASE("EarlyStopping's baseline and start_from_epoch stop where Keras 3's rule does", "[e2e][callbacks]") {
  fs::path dir = temp_dir("e2e_baseline");
  std::ofstream(dir / "unet.yaml") << trainer::testing::sample_unet_config(dir / "run", R"(  epochs: 6
  batch_size: 4
  loss: binary_crossentropy
  callbacks:
    - {type: EarlyStopping, monitor: loss, mode: max, baseline: 100, patience: 1, start_from_epoch: 1}
)");
  const Run r = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu:2", dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  std::ifstream csv(dir / "run" / "log.csv");
  std::string line;
  std::getline(csv, line);
  REQUIRE(line.rfind("epoch,loss", 0) == 0);
  std::vector<double> loss;
  while (std::getline(csv, line)) loss.push_back(std::stod(line.substr(line.find(',') + 1)));
  int keras_stop = -1, wait = 0;
  double best = -INFINITY;
  for (int epoch = 0; epoch < 6 && keras_stop < 0; ++epoch) {
    if (epoch >= int(loss.size())) break;
    if (epoch < 1) continue;  // start_from_epoch: 1
    ++wait;
    if (loss[epoch] > best) {
      best = loss[epoch];  // 100 is never beaten: no reset
      continue;
    }
    if (wait >= 1 && epoch > 0) keras_stop = epoch;
  }
  REQUIRE(keras_stop > 0);  // the loss falls after epoch 1 (Keras's), so a max-mode monitor stops
  CHECK(int(loss.size()) == keras_stop + 1);
  CHECK_THAT(r.out + r.err, Catch::Contains("early stopping at epoch " + std::to_string(keras_stop + 1) +
                                            ": loss did not beat the baseline 100 in " + std::to_string(wait) +
                                            (wait == 1 ? " epoch" : " epochs")));
  // Resumed, the run stays ended (it trained one more epoch, to be stopped again), until the
  // patience is raised: then the wait goes on from where it was.
  const std::string log = slurp(dir / "run" / "log.csv"), last = (dir / "run" / "last.h5").string();
  // ... and a run that ended without its final.h5 (a process killed before it) gets it then, from
  // its last.h5 only: not from another checkpoint of the run, which may be of an earlier epoch.
  fs::remove(dir / "run" / "final.h5");
  fs::copy_file(dir / "run" / "last.h5", dir / "run" / "other.h5");
  const Run other = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu:2 --resume " +
                                    (dir / "run" / "other.h5").string(), dir);
  CHECK(other.code == 0);
  CHECK_FALSE(fs::exists(dir / "run" / "final.h5"));
  fs::remove(dir / "run" / "other.h5");
  const Run again = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu:2 --log-format json "
                                "--resume " + last, dir);
  CHECK(again.code == 0);
  CHECK_THAT(again.err, Catch::Contains("EarlyStopping ended the run of " + last + " at epoch " +
                                        std::to_string(keras_stop + 1) + " (loss did not improve for " +
                                        std::to_string(wait) + (wait == 1 ? " epoch" : " epochs") + "; patience 1); nothing to do: raise the "
                                        "EarlyStopping patience above " + std::to_string(wait) + " to train further"));
  CHECK(again.out == "{\"done\": true, \"epochs_run\": " + std::to_string(keras_stop + 1) +
                         ", \"stopped_early\": true, \"stop_signal\": 0, \"files\": [\"" +
                         (dir / "run" / "final.h5").string() + "\"]}\n");
  REQUIRE(fs::exists(dir / "run" / "final.h5"));
  CHECK(trainer::load_checkpoint((dir / "run" / "final.h5").string()).epoch == keras_stop + 1);
  CHECK(slurp(dir / "run" / "log.csv") == log);
  std::string patient = slurp(dir / "unet.yaml");
  patient.replace(patient.find("patience: 1"), 11, "patience: " + std::to_string(wait + 1));
  std::ofstream(dir / "patient.yaml") << patient;
  const Run on = run_trainer("--config " + (dir / "patient.yaml").string() + " --gpus cpu:2 --resume " + last, dir);
  INFO(on.err);
  CHECK(on.code == 0);
  CHECK_THAT(on.out + on.err, Catch::Contains("early stopping at epoch " + std::to_string(keras_stop + 2)));
  fs::remove_all(dir);
}

TEST_CASE("a run stopped by a signal with EarlyStopping's patience 0 resumes and trains on", "[e2e][callbacks]") {
  // Its wait counter is 0 after an improving epoch, 0 >= patience 0, and the resume took the run
  // for one that EarlyStopping had ended. Only a run that EarlyStopping ended says so in its checkpoint.
  fs::path dir = temp_dir("e2e_patience_0");
  std::ofstream(dir / "unet.yaml") << trainer::testing::sample_unet_config(
      dir / "run", "  epochs: 3\n  callbacks:\n    - {type: EarlyStopping, monitor: loss}\n");
  REQUIRE(run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu --epochs 1", dir).code == 0);
  const trainer::Checkpoint one = trainer::load_checkpoint((dir / "run" / "last.h5").string());
  REQUIRE(one.state_scalars.at("early_stopping_wait") == 0);
  CHECK_FALSE(one.state_scalars.count("early_stopped"));
  const Run on = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu --resume " +
                                 (dir / "run" / "last.h5").string(),
                             dir);
  INFO(on.err);
  CHECK(on.code == 0);
  CHECK_THAT(on.err, !Catch::Contains("EarlyStopping ended the run"));
  CHECK(trainer::load_checkpoint((dir / "run" / "last.h5").string()).epoch >= 2);
  fs::remove_all(dir);
}

TEST_CASE("a global batch smaller than the tower count trains and warns", "[e2e]") {
  fs::path dir = temp_dir("e2e_idle_towers");
  std::ofstream(dir / "unet.yaml") << small_unet(dir / "run");
  const Run r =
      run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu:3 --batch-size 2 --epochs 1", dir);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("global batch 2 is smaller than the 3 towers: 1 of them get no sample each step"));
  fs::remove_all(dir);
}

TEST_CASE("user errors exit with 2 and a message naming the place", "[e2e]") {
  fs::path dir = temp_dir("e2e_errors");
  std::ofstream(dir / "bad.yaml") << "model:\n  layers:\n    - {type: Input, shape: [8, 8, 1]}\n"
                                     "data: {images: a, masks: b}\ntraining: {epoch: 3}\n";
  Run r = run_trainer("--config " + (dir / "bad.yaml").string() + " --gpus cpu", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("bad.yaml:5:") && Catch::Contains("did you mean 'epochs'"));

  r = run_trainer("--gpus cpu", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--config is required"));

  r = run_trainer("--config " + (dir / "missing.yaml").string(), dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("missing.yaml"));

  r = run_trainer("--config x.yaml --epochs zero", dir);
  CHECK(r.code == 2);
  // Far more threads than cores: a warning (the run then stops at the missing data).
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  r = run_trainer("--config " + std::string(TRAINER_SOURCE_DIR) + "/configs/unet_small.yaml --gpus cpu --threads " +
                      std::to_string(4 * cores) + " --images " + (dir / "nowhere").string() + " --output " +
                      (dir / "o").string(),
                  dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--threads " + std::to_string(4 * cores) + " is more than twice this machine's"));
  // Fewer threads than CPU towers: each still gets one, and the log says so.
  r = run_trainer("--config " + std::string(TRAINER_SOURCE_DIR) + "/configs/unet_small.yaml --gpus cpu:3 --threads 1"
                  " --images " + (dir / "nowhere").string() + " --output " + (dir / "o").string(),
                  dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--threads 1 is fewer than the 3 CPU towers; each tower runs at least 1 thread (3 "
                                    "in all)") &&
                        Catch::Contains("3 CPU towers (1 CPU thread(s) each)"));
  // Seeds CLI11 would wrap or saturate into 2^64 - 1 (the config rejects them too).
  for (const char* seed : {"-1", "18446744073709551616", "99999999999999999999999"}) {
    r = run_trainer(std::string("--config x.yaml --seed ") + seed, dir);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains(std::string("--seed: '") + seed + "' is not an integer in [0, "));
  }

  // A mistyped flag: named in the order given, with the flag meant.
  r = run_trainer("--config x.yaml --epoch 1", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("unexpected argument(s) for 'trainer': --epoch 1 (did you mean '--epochs'?)"));
  r = run_trainer("predict --checkpoint a.h5 --input b --output c --treshold 0.4", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("for 'trainer predict': --treshold 0.4 (did you mean '--threshold'?)"));

  // Flags before a command: refused, not silently left to the training run (a user's --gpus ran on the default).
  r = run_trainer("--gpus cpu:2 --epochs 3 predict --checkpoint a.h5 --input b --output c", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("error: 'trainer predict' reads only the flags after it (those before it are the "
                                    "training run's): put --gpus after 'predict' (trainer predict --gpus ...); it "
                                    "takes no --epochs: remove it"));
  r = run_trainer("--config x.yaml summary", dir);  // CLI11 alone said "--config is required"
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("put --config after 'summary'") && !Catch::Contains("required"));
  r = run_trainer("--checkpoint a.h5 predict --input b --output c", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("put --checkpoint after 'predict'"));
  // A config given without --config ("--config is required" alone).
  r = run_trainer("summary unet.yaml", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("error: --config is required (a config is given with --config: --config "
                                    "unet.yaml); run 'trainer summary --help' for usage"));
  r = run_trainer("unet.yml --epochs 2", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("unexpected argument(s) for 'trainer': unet.yml (a config is given with --config: "
                                    "--config unet.yml)"));
  // A command's missing flag points to that command's --help.
  r = run_trainer("predict --checkpoint a.h5 --input b", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("error: --output is required; run 'trainer predict --help' for usage"));
  // A long flag with one dash: CLI11 read -config as -c onfig and called the config file unexpected.
  r = run_trainer("-config x.yaml --gpus cpu", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("error: '-config' has one dash (one starts a short flag such as -c): write "
                                    "--config") && !Catch::Contains("unexpected"));
  r = run_trainer("predict -checkpoint=a.h5 --input b --output c", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("'-checkpoint=a.h5' has one dash") && Catch::Contains("write --checkpoint"));
  // A command's short flag before it ("--input is required" before), and a flag written twice, named once.
  r = run_trainer("-i b predict --checkpoint a.h5 --output c", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("put --input after 'predict' (trainer predict --input ...)"));
  r = run_trainer("--checkpoint=a.h5 --checkpoint=b.h5 predict --input b --output c", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::EndsWith("put --checkpoint after 'predict' (trainer predict --checkpoint ...)\n"));

  std::ofstream(dir / "ok.yaml") << small_unet(dir / "run");
  r = run_trainer("--config " + (dir / "ok.yaml").string() + " --gpus 7", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--gpus 7"));

  r = run_trainer("--config " + (dir / "ok.yaml").string() + " --gpus cpu --images " + (dir / "nowhere").string(), dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("nowhere"));
  CHECK_THAT(r.out, !Catch::Contains("Total params"));  // the folder error comes before the model summary
  CHECK_FALSE(fs::exists(dir / "run" / "final.h5"));

  // An empty path (an unset shell variable) is an error, not a flag left out.
  for (const char* flag : {"--resume", "--output", "--images", "--masks"}) {
    INFO(flag);
    r = run_trainer("--config " + (dir / "ok.yaml").string() + " --gpus cpu " + flag + " ''", dir);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains(std::string(flag) + ": the value is empty"));
  }
  r = run_trainer("predict --checkpoint '' --input x --output y", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--checkpoint: the value is empty"));
  CHECK_FALSE(fs::exists(dir / "run"));
  fs::remove_all(dir);
}

TEST_CASE("summary validates a config and prints the model table", "[e2e]") {
  fs::path dir = temp_dir("e2e_summary");
  Run r = run_trainer("summary --config " + std::string(TRAINER_SOURCE_DIR) + "/configs/unet.yaml", dir);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("Total params: 31,031,745"));
  CHECK_THAT(r.out, !Catch::Contains("Planned device memory"));  // only when asked for
  // With --batch-size or --precision, the GPU tower's memory plan follows
  // (its parts: tests/test_memory_plan.cpp); the seed U-Net's SGD with
  // momentum keeps one slot: weights, gradients and slots are 118.4 MiB each.
  r = run_trainer("summary --config " + std::string(TRAINER_SOURCE_DIR) + "/configs/unet.yaml --batch-size 4 "
                  "--precision bf16", dir);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("Planned device memory of one GPU tower, training 4 sample(s) a step in bf16:") &&
                        Catch::Contains("not counted: cuDNN's algorithm workspace"));
  const size_t slots = r.out.find("  optimizer slots ");
  REQUIRE(slots != std::string::npos);
  CHECK_THAT(r.out.substr(slots, r.out.find('\n', slots) - slots), Catch::EndsWith(" 118.4 MiB"));
  r = run_trainer("summary --config " + std::string(TRAINER_SOURCE_DIR) + "/configs/unet.yaml --batch-size 0", dir);
  CHECK(r.code != 0);
  r = run_trainer("--help", dir);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("--gpus"));
  r = run_trainer("--version", dir);  // the build: version and commit
  CHECK(r.code == 0);
  CHECK(r.out == "trainer " + std::string(trainer::build_id()) + "\n");
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint the disk cannot hold ends the run with exit 2 and one message, not a crash", "[e2e]") {
  // A file size limit (writes past it fail with EFBIG, as on a full disk)
  // far below the checkpoints' sizes (30 and 60 KB): 16 blocks, 8 KiB in
  // dash's 512-byte unit, 16 KiB in bash's. HDF5 used to crash at exit on the file
  // whose write had failed (exit 139).
  TempDir dir("e2e_disk_full");
  std::ofstream(dir.root / "one.yaml") << sample_unet_config(dir.root / "run", "  epochs: 1\n  batch_size: 4\n");
  const std::string limited = "-c \"trap '' XFSZ; ulimit -f 16; exec " + std::string(TRAINER_BINARY) +
                              " --config " + (dir.root / "one.yaml").string() + " --gpus cpu\"";
  const Run r = run("/bin/sh", limited, dir.root);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("error: cannot write checkpoint '" + (dir.root / "run" / "last.h5").string() +
                                    "': HDF5: ") &&
                        Catch::Contains("File too large") && Catch::Contains("the previous file at that path is untouched"));
  // HDF5's whole description (time, buffer, offsets) used to spill onto a second line.
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    CHECK(line.find("filename = ") == std::string::npos);
  }
  for (const auto& f : fs::directory_iterator(dir.root / "run")) {
    INFO(f.path());
    CHECK(f.path().filename().string().find(".tmp-") == std::string::npos);
  }
  CHECK_FALSE(fs::exists(dir.root / "run" / "last.h5"));
}

// Keras's validation_data: the last 8 of the sample's 40 pairs in folders of
// their own validate exactly as validation_split 0.2 does on all 40 (the
// same training pairs, order, weights and validation pairs), so the logs
// are identical; the folders must come in pairs and exclude validation_split.
TEST_CASE("data.validation_images/validation_masks validate as validation_split does", "[e2e]") {
  fs::path dir = temp_dir("e2e_validation_folders");
  const fs::path sample = fs::path(TRAINER_SOURCE_DIR) / "data" / "sample";
  std::vector<fs::path> images;
  for (const auto& e : fs::directory_iterator(sample / "images")) images.push_back(e.path());
  std::sort(images.begin(), images.end());
  REQUIRE(images.size() == 40);
  for (const char* part : {"train", "val"}) {
    fs::create_directories(dir / part / "images");
    fs::create_directories(dir / part / "masks");
  }
  for (size_t i = 0; i < images.size(); ++i) {
    const fs::path part = dir / (i < 32 ? "train" : "val");
    const std::string mask = images[i].stem().string() + "_mask.png";
    fs::create_symlink(images[i], part / "images" / images[i].filename());
    fs::create_symlink(sample / "masks" / mask, part / "masks" / mask);
  }
  const std::string training = "  epochs: 2\n  batch_size: 4\n  metrics: [dice]\n";
  std::ofstream(dir / "split.yaml") << sample_unet_config(dir / "split", training);
  std::string folders = sample_unet_config(dir / "folders", training);
  const std::string split_lines = "  images: " + (sample / "images").string() + "\n  masks: " +
                                  (sample / "masks").string() + "\n  validation_split: 0.2\n";
  REQUIRE(folders.find(split_lines) != std::string::npos);
  folders.replace(folders.find(split_lines), split_lines.size(),
                  "  images: " + (dir / "train" / "images").string() + "\n  masks: " +
                      (dir / "train" / "masks").string() + "\n  validation_images: " +
                      (dir / "val" / "images").string() + "\n  validation_masks: " +
                      (dir / "val" / "masks").string() + "\n");
  std::ofstream(dir / "folders.yaml") << folders;
  Run a = run_trainer("--config " + (dir / "split.yaml").string() + " --gpus cpu", dir);
  INFO(a.out << a.err);
  REQUIRE(a.code == 0);
  Run b = run_trainer("--config " + (dir / "folders.yaml").string() + " --gpus cpu", dir);
  INFO(b.out << b.err);
  REQUIRE(b.code == 0);
  CHECK_THAT(b.err, Catch::Contains("training on 32 samples, validating on 8"));
  const std::string log = slurp(dir / "folders" / "log.csv");
  CHECK_THAT(log, Catch::Contains("val_dice"));
  CHECK(log == slurp(dir / "split" / "log.csv"));

  // Both folders or none, and not with validation_split.
  std::string half = folders;
  half.erase(half.find("  validation_masks:"), half.find('\n', half.find("  validation_masks:")) + 1 -
                                                    half.find("  validation_masks:"));
  std::ofstream(dir / "half.yaml") << half;
  Run r = run_trainer("--config " + (dir / "half.yaml").string() + " --gpus cpu", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("'validation_masks' is required"));
  // A wrong validation folder is named as such (not as data.images / data.masks).
  std::string typo = folders;
  typo.replace(typo.find("/val/images"), 11, "/vall/images");
  std::ofstream(dir / "typo.yaml") << typo;
  r = run_trainer("--config " + (dir / "typo.yaml").string() + " --gpus cpu --output " + (dir / "typo").string(), dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("data.validation_images: '" + (dir / "vall" / "images").string() + "'"));
  std::string wrong_masks = folders;  // the training masks hold none of the validation images' masks
  wrong_masks.replace(wrong_masks.find("/val/masks"), 10, "/train/masks");
  std::ofstream(dir / "wrong_masks.yaml") << wrong_masks;
  r = run_trainer("--config " + (dir / "wrong_masks.yaml").string() + " --gpus cpu --output " + (dir / "wm").string(),
                  dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("fix data.validation_masks / data.mask_suffix"));
  std::string both = folders;
  both.replace(both.find("  validation_images:"), 0, "  validation_split: 0.1\n");
  std::ofstream(dir / "both.yaml") << both;
  r = run_trainer("--config " + (dir / "both.yaml").string() + " --gpus cpu", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("validation_split") && Catch::Contains("one or the other"));
  fs::remove_all(dir);
}

// A learning_rate schedule: log.csv's learning_rate is the rate of the
// update after each epoch, as Keras reads optimizer.learning_rate (32
// training pairs, batch 8: steps 4 and 8), and a run
// resumed after epoch 1 continues the schedule from the checkpoint's
// iterations, so its log is the uninterrupted run's.
TEST_CASE("a learning_rate schedule is logged per epoch and continues on resume", "[e2e]") {
  fs::path dir = temp_dir("e2e_schedule");
  auto config = [&](const fs::path& out) {
    std::string c = sample_unet_config(out, "  epochs: 2\n  batch_size: 8\n");
    const std::string adam = "optimizer: {type: Adam, learning_rate: 0.01}";
    c.replace(c.find(adam), adam.size(),
              "optimizer: {type: Adam, learning_rate: {type: ExponentialDecay, initial_learning_rate: 0.01, "
              "decay_steps: 4, decay_rate: 0.5}}");
    return c;
  };
  std::ofstream(dir / "full.yaml") << config(dir / "full");
  std::ofstream(dir / "part.yaml") << config(dir / "part");
  Run full = run_trainer("--config " + (dir / "full.yaml").string() + " --gpus cpu", dir);
  INFO(full.out << full.err);
  REQUIRE(full.code == 0);
  CHECK_THAT(full.err, Catch::Contains("learning rate schedule ExponentialDecay(initial_learning_rate=0.01, "
                                       "decay_steps=4, decay_rate=0.5, staircase=false)"));
  const std::string log = slurp(dir / "full" / "log.csv");
  std::istringstream lines(log);
  std::string header, row;
  std::getline(lines, header);
  std::vector<std::string> names;
  for (std::stringstream h(header); std::getline(h, row, ',');) names.push_back(row);
  const size_t col = size_t(std::find(names.begin(), names.end(), "learning_rate") - names.begin());
  REQUIRE(col < names.size());
  const double want[] = {0.01 * std::pow(0.5, 4.0 / 4), 0.01 * std::pow(0.5, 8.0 / 4)};
  for (double w : want) {
    REQUIRE(std::getline(lines, row));
    std::vector<std::string> cells;
    for (std::stringstream r(row); std::getline(r, header, ',');) cells.push_back(header);
    REQUIRE(cells.size() == names.size());
    CHECK(std::stod(cells[col]) == Approx(w).epsilon(1e-6));
  }
  REQUIRE(run_trainer("--config " + (dir / "part.yaml").string() + " --gpus cpu --epochs 1", dir).code == 0);
  Run resumed = run_trainer(
      "--config " + (dir / "part.yaml").string() + " --gpus cpu --resume " + (dir / "part" / "last.h5").string(), dir);
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.code == 0);
  CHECK(slurp(dir / "part" / "log.csv") == log);
  fs::remove_all(dir);
}

TEST_CASE("a flag overrides only its key, not the other uses of a YAML anchor it was written with", "[e2e]") {
  const fs::path dir = temp_dir("e2e_alias");
  std::ofstream(dir / "c.yaml") << sample_unet_config(dir / "run", "  epochs: 1\n  batch_size: &n 8\n"
                                                                   "  steps_per_epoch: *n\n");
  const Run r = run_trainer("--config " + (dir / "c.yaml").string() + " --gpus cpu --batch-size 4", dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const trainer::Config stored =
      trainer::parse_config(trainer::load_checkpoint((dir / "run" / "final.h5").string()).config_yaml, "final.h5");
  CHECK(stored.training.batch_size == 4);
  CHECK(stored.training.steps_per_epoch == 8);  // as the run used it: the flag changed batch_size alone
  fs::remove_all(dir);
}
