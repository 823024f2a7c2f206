// Full resume and safe stops, through the trainer binary on real images from
// data/sample: a resumed run ends with bit-identical weights; SIGTERM/SIGINT
// stop after a step with a checkpoint and exit 143/130; SIGKILL during writes
// leaves readable checkpoints; bad --resume files are user errors.
#include <signal.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <opencv2/imgcodecs.hpp>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "data/boundary_classes.h"
#include "dsb_testing.h"
#include "io/checkpoint.h"
#include "train/fit.h"
#include "train/instance_metrics.h"
#include "io/event_file.h"
#include "process_testing.h"

namespace fs = std::filesystem;
using namespace trainer;
using trainer::testing::Child;
using trainer::testing::slurp;
using trainer::testing::temp_dir;
using trainer::testing::wait_exit;

namespace {

const std::string kSample = std::string(TRAINER_SOURCE_DIR) + "/data/sample";

// A small U-Net at 48x48 with Dropout, BatchNormalization and Adam, whose
// every piece of state (optimizer slots, moving statistics, dropout step,
// data order) must survive a resume.
std::string config(const fs::path& out, int epochs, const std::string& extra_callbacks = "") {
  return R"(model:
  layers:
    - {type: Input, shape: [48, 48, 3]}
    - {type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {type: BatchNormalization, momentum: 0.9}
    - {type: MaxPooling2D}
    - {type: Conv2D, filters: 16, kernel_size: 3, padding: same, activation: relu}
    - {type: Dropout, rate: 0.2}
    - {name: up, type: Conv2DTranspose, filters: 8, kernel_size: 2, strides: 2, padding: same}
    - {type: Concatenate, inputs: [up, c1]}
    - {type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data:
  images: )" + kSample + R"(/images
  masks: )" + kSample + R"(/masks
  validation_split: 0.2
training:
  epochs: )" + std::to_string(epochs) + R"(
  batch_size: 3
  seed: 5
  loss: bce_dice
  metrics: [mean_iou]
  optimizer: {type: Adam, learning_rate: 0.003}
  output_dir: )" + out.string() + R"(
  callbacks:
    - {type: EarlyStopping, monitor: val_loss, patience: 50, restore_best_weights: true}
)" + extra_callbacks;
}

// Starts the trainer with args (stdout/stderr into dir/out.txt, dir/err.txt), returning at once.
Child start(const std::string& args, const fs::path& dir) {
  return trainer::testing::start(TRAINER_BINARY, args, dir / "out.txt", dir / "err.txt");
}

int run(const std::string& args, const fs::path& dir) { return wait_exit(start(args, dir)); }

// Waits until file has at least `lines` lines (or the timeout passes).
void wait_for_lines(const fs::path& file, int lines, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    std::string text = slurp(file);
    if (std::count(text.begin(), text.end(), '\n') >= lines) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The values of column `name` of a CSV log, row by row.
std::vector<double> csv_column(const std::string& csv, const std::string& name) {
  std::istringstream in(csv);
  std::string line, cell;
  std::getline(in, line);
  std::istringstream header(line);
  int col = -1;
  for (int i = 0; std::getline(header, cell, ','); ++i)
    if (cell == name) col = i;
  REQUIRE(col >= 0);
  std::vector<double> out;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    for (int i = 0; i <= col; ++i) std::getline(row, cell, ',');
    out.push_back(std::stod(cell));
  }
  return out;
}

void require_same_weights(const fs::path& a, const fs::path& b) {
  Checkpoint x = load_checkpoint(a.string()), y = load_checkpoint(b.string());
  REQUIRE(x.weights.size() == y.weights.size());
  for (size_t i = 0; i < x.weights.size(); ++i) {
    INFO(x.weights[i].layer << "/" << x.weights[i].name);
    REQUIRE(x.weights[i].values == y.weights[i].values);  // bit for bit
  }
}

}  // namespace

TEST_CASE("resuming at an epoch boundary ends with the weights of an uninterrupted run", "[resume][multitower]") {
  fs::path dir = temp_dir("resume_boundary");
  std::ofstream(dir / "c.yaml") << config(dir / "full", 4);
  std::ofstream(dir / "r.yaml") << config(dir / "part", 4);
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu:2 --threads 2", dir) == 0);
  REQUIRE(run("--config " + (dir / "r.yaml").string() + " --gpus cpu:2 --threads 2 --epochs 2", dir) == 0);
  const Checkpoint last = load_checkpoint((dir / "part" / "last.h5").string());
  CHECK(last.state_scalars.at("next_epoch") == 3);
  CHECK(last.state_arrays.count("optimizer_m"));
  REQUIRE(run("--config " + (dir / "r.yaml").string() + " --gpus cpu:2 --threads 2 --resume " +
                  (dir / "part" / "last.h5").string(),
              dir) == 0);
  require_same_weights(dir / "full" / "final.h5", dir / "part" / "final.h5");
  const std::string csv = slurp(dir / "part" / "log.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 5);  // header + 4 epochs, appended across the two runs
  CHECK(csv == slurp(dir / "full" / "log.csv"));            // the same losses and metrics, digit for digit
  // restore_best_weights: final.h5 holds the best val_loss epoch's weights, and says so with that epoch's logs
  // (it said epoch 4 with epoch 4's logs over epoch 3's weights), also across the resume.
  const std::vector<double> val = csv_column(csv, "val_loss");
  const auto best = std::min_element(val.begin(), val.end());
  const Checkpoint final_ckpt = load_checkpoint((dir / "part" / "final.h5").string());
  CHECK(final_ckpt.epoch == int(best - val.begin()) + 1);
  CHECK(final_ckpt.logs.at("val_loss") == Approx(*best).epsilon(1e-8));
  fs::remove_all(dir);
}

// steps_per_epoch: epochs of 2 steps draw the batches of the same passes over
// the training set as epochs of one pass (11 batches of 3 from 32 samples),
// so 11 short epochs end with the weights of 2 passes, also when resumed
// between them, and the log has a row per short epoch; longer epochs and a
// resume with another steps_per_epoch continue the same sequence of batches.
TEST_CASE("steps_per_epoch: short epochs take the next batches of the same shuffled passes", "[resume]") {
  fs::path dir = temp_dir("steps_per_epoch");
  auto plain = [&](const fs::path& out, int epochs, const std::string& steps) {
    std::string c = config(out, epochs);
    const std::string early = "    - {type: EarlyStopping, monitor: val_loss, patience: 50, restore_best_weights: true}\n";
    c.replace(c.find(early), early.size(), "");  // best weights would differ by epoch length
    c.replace(c.find("  callbacks:\n"), 13, "");
    if (!steps.empty()) c.replace(c.find("  batch_size: 3\n"), 16, "  batch_size: 3\n  steps_per_epoch: " + steps + "\n");
    return c;
  };
  std::ofstream(dir / "full.yaml") << plain(dir / "full", 2, "");
  std::ofstream(dir / "short.yaml") << plain(dir / "short", 11, "2");
  std::ofstream(dir / "part.yaml") << plain(dir / "part", 11, "2");
  REQUIRE(run("--config " + (dir / "full.yaml").string() + " --gpus cpu", dir) == 0);
  REQUIRE(run("--config " + (dir / "short.yaml").string() + " --gpus cpu", dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("an epoch is 2 steps (training.steps_per_epoch; a pass over "
                                                     "the training set is 11)"));
  require_same_weights(dir / "full" / "final.h5", dir / "short" / "final.h5");
  const std::string csv = slurp(dir / "short" / "log.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 12);  // header + 11 epochs
  REQUIRE(run("--config " + (dir / "part.yaml").string() + " --gpus cpu --epochs 6", dir) == 0);  // mid-pass
  REQUIRE(run("--config " + (dir / "part.yaml").string() + " --gpus cpu --resume " +
                  (dir / "part" / "last.h5").string(),
              dir) == 0);
  require_same_weights(dir / "full" / "final.h5", dir / "part" / "final.h5");
  CHECK(slurp(dir / "part" / "log.csv") == csv);

  // Epochs longer than a pass (17 > 11 steps), and a resume with another
  // steps_per_epoch: 3 epochs of 4 steps, then one of 5, continue the same
  // sequence as one epoch of 17 (the step count, not the epoch, places a batch).
  std::ofstream(dir / "long.yaml") << plain(dir / "long", 1, "17");
  std::ofstream(dir / "four.yaml") << plain(dir / "mixed", 3, "4");
  std::ofstream(dir / "five.yaml") << plain(dir / "mixed", 4, "5");
  REQUIRE(run("--config " + (dir / "long.yaml").string() + " --gpus cpu", dir) == 0);
  REQUIRE(run("--config " + (dir / "four.yaml").string() + " --gpus cpu", dir) == 0);
  REQUIRE(run("--config " + (dir / "five.yaml").string() + " --gpus cpu --resume " +
                  (dir / "mixed" / "last.h5").string(),
              dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("training.steps_per_epoch is 5 (the checkpoint's run used 4)"));
  require_same_weights(dir / "long" / "final.h5", dir / "mixed" / "final.h5");
  fs::remove_all(dir);
}

TEST_CASE("ReduceLROnPlateau lowers the rate in the log, and a resumed run keeps its rate and counters", "[resume]") {
  fs::path dir = temp_dir("resume_plateau");
  // min_delta 100: only the first epoch improves, so with patience 2 the rate
  // halves after epochs 3 and 5. The resumed run starts after epoch 4, with
  // the rate reduced once and one epoch counted towards the next reduction.
  const std::string cb = "    - {type: ReduceLROnPlateau, monitor: loss, factor: 0.5, patience: 2, min_delta: 100}\n";
  std::ofstream(dir / "c.yaml") << config(dir / "full", 6, cb);
  std::ofstream(dir / "r.yaml") << config(dir / "part", 6, cb);
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --threads 2", dir) == 0);
  const std::string err = slurp(dir / "err.txt");
  CHECK_THAT(err, Catch::Contains("epoch 3: ReduceLROnPlateau: loss did not improve (patience 2); learning rate "
                                  "0.003 -> 0.0015"));
  CHECK_THAT(err, Catch::Contains("epoch 5: ReduceLROnPlateau: loss did not improve (patience 2); learning rate "
                                  "0.0015 -> 0.00075"));
  CHECK_THAT(slurp(dir / "out.txt"), Catch::Contains("val_mean_iou: ") && Catch::Contains(" - learning_rate: 0.0015"));
  const std::string csv = slurp(dir / "full" / "log.csv");
  const std::vector<double> lr = csv_column(csv, "learning_rate");  // each epoch's rate, as Keras 3 logs it
  REQUIRE(lr.size() == 6);
  const std::vector<double> want = {0.003, 0.003, 0.003, 0.0015, 0.0015, 0.00075};
  for (size_t i = 0; i < lr.size(); ++i) CHECK(lr[i] == Approx(want[i]).epsilon(1e-12));

  REQUIRE(run("--config " + (dir / "r.yaml").string() + " --gpus cpu --threads 2 --epochs 4", dir) == 0);
  const Checkpoint last = load_checkpoint((dir / "part" / "last.h5").string());
  CHECK(last.state_scalars.at("reduce_lr_learning_rate") == Approx(0.0015));
  CHECK(last.state_scalars.at("reduce_lr_wait") == 1);
  REQUIRE(run("--config " + (dir / "r.yaml").string() + " --gpus cpu --threads 2 --resume " +
                  (dir / "part" / "last.h5").string(),
              dir) == 0);
  CHECK(slurp(dir / "part" / "log.csv") == csv);
  require_same_weights(dir / "full" / "final.h5", dir / "part" / "final.h5");

  // A learning_rate changed before resuming scales the carried rate (0.0015 * 0.006 / 0.003);
  // a dropped callback is warned about; a rate a long plateau drove near 0 still resumes.
  std::string faster = config(dir / "fast", 6, cb);
  faster.replace(faster.find("learning_rate: 0.003"), 20, "learning_rate: 0.006");
  std::ofstream(dir / "fast.yaml") << faster;
  const std::string part4 = (dir / "part4.h5").string();
  Checkpoint four = last;
  save_checkpoint(part4, four);
  REQUIRE(run("--config " + (dir / "fast.yaml").string() + " --gpus cpu --threads 2 --resume " + part4, dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("training.optimizer.learning_rate is 0.006 (the checkpoint's "
                                                     "run used 0.003)"));
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("ReduceLROnPlateau: the carried learning rate 0.0015 becomes "
                                                     "0.003 (learning_rate is 0.006, was 0.003)"));
  const std::vector<double> fast = csv_column(slurp(dir / "fast" / "log.csv"), "learning_rate");
  // Epoch 4's row from part4.h5's logs (no log beside it to carry over; its rate as the run logged it), 5 and 6.
  REQUIRE(fast.size() == 3);
  CHECK(fast[0] == Approx(0.0015).epsilon(1e-12));
  CHECK(fast[1] == Approx(0.003).epsilon(1e-12));
  CHECK(fast[2] == Approx(0.0015).epsilon(1e-12));
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("holds the rows of 1 of the 4 epoch(s) the checkpoint has "
                                                     "trained (there is no earlier log): the other rows stay missing"));
  std::ofstream(dir / "none.yaml") << config(dir / "none", 6);
  CHECK(run("--config " + (dir / "none.yaml").string() + " --gpus cpu --threads 2 --resume " + part4, dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("ReduceLROnPlateau is off (the checkpoint's run used "
                                                     "on)"));
  four.state_scalars["reduce_lr_learning_rate"] = 3e-33;
  save_checkpoint(part4, four);
  CHECK(run("--config " + (dir / "r.yaml").string() + " --gpus cpu --threads 2 --overwrite --output " +
                (dir / "tiny_rate").string() + " --resume " + part4,
            dir) == 0);
  fs::remove_all(dir);
}

namespace {

// Trains the config make(out) once uninterrupted (into dir/full) and once
// stopped by SIGTERM inside an epoch and resumed (into dir/part): both end
// with the same weights and the same log rows, so the interrupted epoch's
// partial sums (loss, metric counts) were saved and restored.
void check_stop_inside_an_epoch(const fs::path& dir, const std::function<std::string(const fs::path&)>& make) {
  std::ofstream(dir / "c.yaml") << make(dir / "full");
  std::ofstream(dir / "r.yaml") << make(dir / "part");
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --threads 1", dir) == 0);
  Checkpoint stopped;
  for (int delay_ms : {60, 30, 120, 10, 200, 0}) {
    fs::remove_all(dir / "part");
    Child c = start("--config " + (dir / "r.yaml").string() + " --gpus cpu --threads 1", dir);
    wait_for_lines(dir / "part" / "log.csv", 2, 60);  // epoch 1 done: the stop lands in a later epoch
    // ... once its last.h5 is written too: a signal that comes while it is saved (slow on a loaded machine)
    // is taken at epoch 1's end, at step 0.
    for (int i = 0; i < 3000 && !fs::exists(dir / "part" / "last.h5"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(c.pid, SIGTERM);
    const int code = wait_exit(c);
    if (code == 0) continue;  // the run ended before the signal (a fresh-clone CI run did): another delay
    REQUIRE(code == 143);
    CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("--resume") &&
                                           Catch::Contains("stopping on SIGTERM: finishing this step") &&
                                           !Catch::Contains("Ctrl-C"));
    CHECK_FALSE(fs::exists(dir / "part" / "final.h5"));
    stopped = load_checkpoint((dir / "part" / "last.h5").string());
    if (stopped.state_scalars.at("next_step") > 0) break;
  }
  REQUIRE(stopped.state_scalars.count("next_step"));  // some delay stopped the run
  INFO("stopped at epoch " << stopped.state_scalars.at("next_epoch") << ", step " << stopped.state_scalars.at("next_step"));
  REQUIRE(stopped.state_scalars.at("next_step") > 0);  // inside an epoch: its partial sums must carry over
  REQUIRE(run("--config " + (dir / "r.yaml").string() + " --gpus cpu --threads 1 --resume " +
                  (dir / "part" / "last.h5").string(),
              dir) == 0);
  require_same_weights(dir / "full" / "final.h5", dir / "part" / "final.h5");
  // final.h5 says the epoch of its weights (restore_best_weights) with that epoch's logs, across the resume too.
  const Checkpoint full = load_checkpoint((dir / "full" / "final.h5").string());
  const Checkpoint part = load_checkpoint((dir / "part" / "final.h5").string());
  CHECK(full.epoch == part.epoch);
  CHECK(full.logs == part.logs);
  // The interrupted epoch's sums were saved too, so every logged figure matches.
  CHECK(slurp(dir / "part" / "log.csv") == slurp(dir / "full" / "log.csv"));
}

// Batches of 1: 32 steps an epoch, so a stop lands inside an epoch, which is
// what the stop tests are about (tried again a little later if it hit a boundary).
std::string one_per_batch(std::string text) { return text.replace(text.find("batch_size: 3"), 13, "batch_size: 1"); }

}  // namespace

TEST_CASE("SIGTERM stops after a step with a checkpoint, and resuming gives the uninterrupted weights", "[resume]") {
  fs::path dir = temp_dir("resume_sigterm");
  check_stop_inside_an_epoch(dir, [](const fs::path& out) { return one_per_batch(config(out, 6)); });
  fs::remove_all(dir);
}

TEST_CASE("a 3-class model stopped inside an epoch resumes with its confusion counts", "[resume][categorical]") {
  fs::path dir = temp_dir("resume_classes");
  // Three-class masks of the sample: each mask's connected components as objects, their boundary_classes.
  fs::create_directories(dir / "classes");
  for (const auto& e : fs::directory_iterator(kSample + "/masks")) {
    cv::Mat labels;
    connected_objects(cv::imread(e.path().string(), cv::IMREAD_GRAYSCALE) > 127).convertTo(labels, CV_16U);
    REQUIRE(cv::imwrite((dir / "classes" / e.path().filename()).string(), boundary_classes(labels, 1)));
  }
  check_stop_inside_an_epoch(dir, [&](const fs::path& out) {
    std::string text = one_per_batch(config(out, 6));
    text.replace(text.find(kSample + "/masks"), kSample.size() + 6, (dir / "classes").string());
    text.replace(text.find("filters: 1, kernel_size: 1, activation: sigmoid"), 47,
                 "filters: 3, kernel_size: 1, activation: softmax");
    text.replace(text.find("loss: bce_dice"), 14, "loss: sparse_categorical_crossentropy");
    text.replace(text.find("metrics: [mean_iou]"), 19, "metrics: [mean_iou, accuracy]");
    return text;
  });
  const Checkpoint last = load_checkpoint((dir / "part" / "last.h5").string());
  CHECK(last.state_double_arrays.at("epoch_counts").size() == 25 + 9);
  fs::remove_all(dir);
}

namespace {

// Trains config(dir / "run", 40) on gpus, sends sig once epoch 1 has ended, and returns the exit code.
int stop_after_epoch_1(const fs::path& dir, const std::string& gpus, int sig) {
  std::ofstream(dir / "c.yaml") << config(dir / "run", 40);
  Child c = start("--config " + (dir / "c.yaml").string() + " --gpus " + gpus, dir);
  wait_for_lines(dir / "run" / "log.csv", 2, 60);
  kill(c.pid, sig);
  return wait_exit(c);
}

}  // namespace

TEST_CASE("a checkpoint of 2 towers resumes on 1 tower, and SIGINT exits with 130", "[resume][multitower]") {
  fs::path dir = temp_dir("resume_towers");
  REQUIRE(stop_after_epoch_1(dir, "cpu:2", SIGINT) == 130);
  // Said when the signal came (a user saw nothing for 16 s of a slow step, and pressed Ctrl-C again).
  const std::string err = slurp(dir / "err.txt");
  CHECK_THAT(err, Catch::Contains("stopping: finishing this step, then writing last.h5 (a second Ctrl-C exits at "
                                  "once, without it)"));
  CHECK(err.find("stopping: finishing") < err.find("stopped by signal 2"));
  // The continuation is the run's own command with --resume (a user resumed without the -o it had had).
  CHECK_THAT(err, Catch::Contains("continue with: " + std::string(TRAINER_BINARY) + " --config " +
                                  (dir / "c.yaml").string() + " --gpus cpu:2 --resume " +
                                  (dir / "run" / "last.h5").string() + "\n"));
  // Resumed by a config of another output_dir, without --output: a branch, said with the way to stay in place.
  std::ofstream(dir / "other.yaml") << config(dir / "other", 40);
  fs::create_directories(dir / "branch");
  REQUIRE(run("--config " + (dir / "other.yaml").string() + " --gpus cpu --epochs 3 --resume " +
                  (dir / "run" / "last.h5").string(),
              dir / "branch") == 0);
  CHECK_THAT(slurp(dir / "branch" / "err.txt"),
             Catch::Contains("resuming the run of '" + (dir / "run").string() + "' into '" + (dir / "other").string() +
                             "' (the config's output_dir): a branch of that run, whose own folder stays as it is; "
                             "to continue it in its own folder, pass --output " + (dir / "run").string()));
  CHECK_FALSE(fs::exists(dir / "run" / "final.h5"));
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --epochs 3 --resume " +
                  (dir / "run" / "last.h5").string(),
              dir) == 0);
  CHECK(fs::exists(dir / "run" / "final.h5"));
  CHECK_THAT(slurp(dir / "err.txt"), !Catch::Contains("a branch of that run"));
  fs::remove_all(dir);
}

TEST_CASE("a second SIGINT exits at once and gives the command that continues from last.h5", "[resume]") {
  fs::path dir = temp_dir("resume_second_sigint");
  std::ofstream(dir / "c.yaml") << config(dir / "run", 40);
  for (int attempt = 0;; ++attempt) {
    fs::remove_all(dir / "run");
    Child c = start("--config " + (dir / "c.yaml").string() + " --gpus cpu", dir);
    wait_for_lines(dir / "run" / "log.csv", 2, 60);  // epoch 1's last.h5 is there
    kill(c.pid, SIGINT);
    // Once the first is handled (two pending SIGINTs are one), and before the step ends, nearly always.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (slurp(dir / "err.txt").find("stopping: finishing") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    kill(c.pid, SIGINT);
    REQUIRE(wait_exit(c) == 130);
    const std::string err = slurp(dir / "err.txt");
    if (err.find("interrupted again") == std::string::npos && attempt < 3) continue;  // the first had ended it
    CHECK_THAT(err, Catch::Contains("interrupted again: exiting now without a checkpoint (the last one stays)\n"
                                    "continue with: " + std::string(TRAINER_BINARY) + " --config " +
                                    (dir / "c.yaml").string() + " --gpus cpu --resume " +
                                    (dir / "run" / "last.h5").string() + "\n"));
    break;
  }
  fs::remove_all(dir);
}

TEST_CASE("SIGHUP (the terminal closed) stops the run as SIGTERM does, with last.h5 and exit 129", "[resume]") {
  // From a batch-job trial: SIGHUP killed the run mid-write, leaving a temporary file and log.csv ahead of last.h5.
  fs::path dir = temp_dir("resume_sighup");
  // Under nohup (ctest started so) SIGHUP is ignored, which the trainer would inherit and keep: the default here.
  struct sigaction dfl {}, before {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGHUP, &dfl, &before);
  const int code = stop_after_epoch_1(dir, "cpu", SIGHUP);
  sigaction(SIGHUP, &before, nullptr);
  CHECK(code == 129);
  const std::string err = slurp(dir / "err.txt");
  CHECK_THAT(err, Catch::Contains("stopping on SIGHUP (the terminal closed): finishing this step, then writing "
                                  "last.h5") &&
                      Catch::Contains("continue with: "));
  const Checkpoint last = load_checkpoint((dir / "run" / "last.h5").string());
  CHECK(last.epoch >= 1);
  fs::remove_all(dir);
}

namespace {

// Starts trainer args (with --images/--masks of the 596 DSB images, so that loading them takes a while) in dir,
// calls meanwhile() once it has begun to load them, and returns its exit code. attempt: retries so far; returns
// -1 when the loading had ended before meanwhile() (the caller tries again).
int while_loading(const fs::path& dir, const std::string& args, const std::function<void()>& meanwhile) {
  const std::string flat = std::string(TRAINER_SOURCE_DIR) + "/../shared/data/dsb2018/flat";
  Child c = start(args + " --threads 1 --images " + flat + "/train_im --masks " + flat + "/train_mask", dir);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (slurp(dir / "err.txt").find("loading 596 image/mask pairs") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  meanwhile();
  const bool late = slurp(dir / "err.txt").find("loading 596/596") != std::string::npos;
  const int code = wait_exit(c);
  return late && code == 0 ? -1 : code;
}

}  // namespace

TEST_CASE("a run whose folder got another run's files while its data loaded is refused once it locks it",
          "[resume]") {
  TRAINER_REQUIRE_DSB();
  // From a batch-job trial: a run started and ended in the folder while this one loaded 596 images, and this
  // one then overwrote it without --overwrite (the folder was checked before the loading, the lock taken after).
  fs::path dir = temp_dir("resume_late_check");
  std::ofstream(dir / "c.yaml") << config(dir / "run", 1);
  int code = -1;
  for (int attempt = 0; code == -1 && attempt < 4; ++attempt) {
    fs::remove_all(dir / "run");
    code = while_loading(dir, "--config " + (dir / "c.yaml").string() + " --gpus cpu", [&] {
      fs::create_directories(dir / "run");
      std::ofstream(dir / "run" / "log.csv") << "epoch,loss\n0,0.5\n";  // the other run's, meanwhile
    });
  }
  INFO(slurp(dir / "err.txt"));
  CHECK(code == 2);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("holds an earlier run (log.csv"));
  CHECK(slurp(dir / "run" / "log.csv") == "epoch,loss\n0,0.5\n");
  // Two resumes of one last.h5: the one whose last.h5 was written again while it loaded is refused (from a
  // review: it trained the other's epochs again from its stale copy).
  std::ofstream(dir / "two.yaml") << config(dir / "two", 3);
  const fs::path last = dir / "two" / "last.h5";
  code = -1;
  for (int attempt = 0; code == -1 && attempt < 4; ++attempt) {
    fs::remove_all(dir / "two");  // each attempt from one finished epoch (a late one trains on to the end)
    REQUIRE(run("--config " + (dir / "two.yaml").string() + " --gpus cpu --epochs 1", dir) == 0);
    code = while_loading(dir, "--config " + (dir / "two.yaml").string() + " --gpus cpu --resume " + last.string(),
                         [&] {
                           fs::copy_file(last, dir / "copy.h5", fs::copy_options::overwrite_existing);
                           fs::rename(dir / "copy.h5", last);  // as a run writing it again does
                         });
  }
  INFO(slurp(dir / "err.txt"));
  CHECK(code == 2);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains(last.string() + " has changed since this run read it"));
  fs::remove_all(dir);
}

TEST_CASE("a resume of last.h5 whose log holds a row more drops the row and removes no file", "[resume]") {
  // A process killed between an epoch's log row and its last.h5 (the order of earlier builds)
  // left log.csv a row ahead, and the resume took the run for a rewind and removed its best.h5.
  fs::path dir = temp_dir("resume_row_ahead");
  std::ofstream(dir / "c.yaml") << config(dir / "run", 3, "    - {type: ModelCheckpoint, filepath: best.h5}\n");
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --epochs 2", dir) == 0);
  const std::string two = slurp(dir / "run" / "log.csv");
  std::ofstream(dir / "run" / "log.csv", std::ios::app) << "2,0.5,0.5,0.5,0.5\n";
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --resume " + (dir / "run" / "last.h5").string(),
              dir) == 0);
  const std::string err = slurp(dir / "err.txt");
  CHECK_THAT(err, !Catch::Contains("removed the earlier run's"));
  CHECK_THAT(err, Catch::Contains("the row(s) of 1 epoch(s) after the checkpoint's 2 are dropped"));
  const std::string three = slurp(dir / "run" / "log.csv");
  CHECK(three.rfind(two, 0) == 0);
  CHECK(std::count(three.begin(), three.end(), '\n') == 4);
  CHECK(three.find("2,0.5,0.5,0.5,0.5") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("SIGKILL while checkpoints are written leaves the previous ones readable", "[resume]") {
  fs::path dir = temp_dir("resume_sigkill");
  std::ofstream(dir / "c.yaml") << config(dir / "run", 1000,
                                           "    - {type: ModelCheckpoint, filepath: every.h5}\n");
  // Each run writes two checkpoints per epoch (every.h5, last.h5) right after its
  // log row; it is killed at several points after epoch 2's row, when epoch 1's
  // files exist for sure and epoch 2's are being replaced, so kills land mid-write.
  for (int delay_ms : {0, 40, 110, 230}) {
    fs::remove_all(dir / "run");
    Child c = start("--config " + (dir / "c.yaml").string() + " --gpus cpu", dir);
    wait_for_lines(dir / "run" / "log.csv", 3, 60);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(c.pid, SIGKILL);
    wait_exit(c);
    for (const char* name : {"every.h5", "last.h5"}) {
      INFO(name << " after a kill " << delay_ms << " ms past epoch 2's log row");
      REQUIRE(fs::exists(dir / "run" / name));
      CHECK_NOTHROW(load_checkpoint((dir / "run" / name).string()));
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("a diverging loss stops naming epoch and step", "[resume]") {
  fs::path dir = temp_dir("resume_nan");
  std::string text = config(dir / "run", 3);
  text.replace(text.find("{type: Adam, learning_rate: 0.003}"), 34, "{type: SGD, learning_rate: 1.0e+30}");
  std::ofstream(dir / "c.yaml") << text;
  CHECK(run("--config " + (dir / "c.yaml").string() + " --gpus cpu", dir) == 2);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("at epoch 1, step") && Catch::Contains("learning_rate"));
  fs::remove_all(dir);
}

TEST_CASE("weights that diverge while the loss stays finite stop the run before a checkpoint is written",
          "[resume]") {
  // Adam at 1e30 drove the kernels to inf and NaN, the ReLUs kept the loss finite, and the
  // run ended with exit 0 and best.h5, last.h5 and final.h5 that trainer itself refuses to load. Here Adam
  // at 1e8 overflows its second moments (the loss stays finite; --threads fixes the sums' order).
  fs::path dir = temp_dir("resume_nan_weights");
  std::string text = config(dir / "run", 3);
  text.replace(text.find("{type: Adam, learning_rate: 0.003}"), 34, "{type: Adam, learning_rate: 1.0e+8}");
  std::ofstream(dir / "c.yaml") << text;
  CHECK(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --threads 2", dir) == 2);
  const std::string err = slurp(dir / "err.txt");
  // Which value overflows first (a weight or a moment) depends on the order of the sums: either is named.
  CHECK_THAT(err, Catch::Contains("training diverged in epoch 1: ") && Catch::Contains(" holds ") &&
                      Catch::Contains("although the loss stayed finite") && Catch::Contains("last.h5' is not written"));
  for (const char* name : {"last.h5", "final.h5"}) CHECK_FALSE(fs::exists(dir / "run" / name));
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint's run folder is found beside it or its ModelCheckpoint subfolder levels up, in the form "
          "given", "[resume]") {
  const fs::path dir = fs::weakly_canonical(temp_dir("resume_run_folder"));
  fs::create_directories(dir / "run" / "ck");
  for (const char* name : {"log.csv", "last.h5"}) std::ofstream(dir / "run" / name) << "x";
  std::ofstream(dir / "run" / "ck" / "ep1.h5") << "x";
  const std::string ep1 = (dir / "run" / "ck" / "ep1.h5").string();
  CHECK(run_folder_of(ep1, "ck/ep{epoch}.h5") == (dir / "run").string());
  CHECK(run_folder_of(ep1, "") == (dir / "run" / "ck").string());         // no subfolder named: beside it
  CHECK(run_folder_of(ep1, "a/b/ep{epoch}.h5") == (dir / "run" / "ck").string());  // two up holds no run
  CHECK(run_folder_of((dir / "run" / "last.h5").string(), "ck/ep{epoch}.h5") == (dir / "run").string());
  // Bare names, from the folder they are in (fs::path("ep1.h5").parent_path() is empty: nothing to walk up).
  const fs::path before = fs::current_path();
  fs::current_path(dir / "run" / "ck");
  const std::string bare = run_folder_of("ep1.h5", "ck/ep{epoch}.h5");
  const bool in_place = resumes_in_place(bare, ".."), elsewhere = resumes_in_place(bare, ".");
  fs::current_path(dir / "run");
  const std::string last = run_folder_of("last.h5", "");
  fs::current_path(before);
  CHECK(bare == "..");
  CHECK(in_place);
  CHECK_FALSE(elsewhere);
  CHECK(last == ".");
  // The refusal to resume into another run's folder names the checkpoint's run folder.
  CHECK_THROWS_WITH(check_output_holds_no_run((dir / "run").string(), "ep1.h5", TrainingConfig{}, ".."),
                    Catch::Contains("(--output .. when it holds that run)"));
  fs::remove_all(dir);
}

TEST_CASE("a folder holding only ModelCheckpoint or TensorBoard files holds a run", "[resume]") {
  // A new run into a folder with an earlier run's best.h5 (its last.h5, log.csv and final.h5
  // moved away) replaced the best model without a word.
  trainer::testing::TempDir dir("only_checkpoints");
  const std::string out = dir.root.string();
  auto with = [](const std::string& filepath) {
    TrainingConfig t;
    t.model_checkpoint.enabled = !filepath.empty();
    t.model_checkpoint.filepath = filepath;
    return t;
  };
  std::ofstream(dir.root / "best.h5") << "h5";
  std::ofstream(dir.root / "notes.h5") << "h5";
  CHECK_NOTHROW(check_output_holds_no_run(out, "", with("")));
  CHECK_NOTHROW(check_output_holds_no_run(out, "", with("other.h5")));
  CHECK_THROWS_WITH(check_output_holds_no_run(out, "", with("best.h5")),
                    Catch::Contains("output folder '" + out + "' holds an earlier run (best.h5), which a new run "
                                    "would overwrite: choose another --output, or pass --overwrite"));
  // A pattern matches the names it could write: {epoch} as digits, a logged value as a number.
  fs::create_directories(dir.root / "ck");
  for (const char* name : {"ep01-0.1234.h5", "ep02-1e-05.h5", "ep03-nan.h5", "ep04-0.5.h5", "epx-0.5.h5"})
    std::ofstream(dir.root / "ck" / name) << "h5";
  CHECK_THROWS_WITH(check_output_holds_no_run(out, "", with("ck/ep{epoch:02d}-{val_loss:.4f}.h5")),
                    Catch::Contains("holds an earlier run (ck/ep01-0.1234.h5, ck/ep02-1e-05.h5, ck/ep03-nan.h5 and "
                                    "1 more checkpoints)"));
  CHECK_NOTHROW(check_output_holds_no_run(out, "", with("ck/ep{epoch}.h5")));  // no name of that shape
  CHECK_NOTHROW(check_output_holds_no_run(out, "", with("{epoch}/best.h5")));   // a placeholder in the folder: not looked for
  // Event files of finished epochs in the TensorBoard folder (a new run removed a Keras project's
  // logs/train); batch values alone are what a run that failed in its first epoch leaves, for its rerun.
  TrainingConfig tb = with("");
  tb.tensorboard.enabled = true;
  CHECK_NOTHROW(check_output_holds_no_run(out, "", tb));
  {
    EventFileWriter w((dir.root / "logs" / "train").string());
    w.scalar("batch_loss", 0.5, 1);
  }
  CHECK_NOTHROW(check_output_holds_no_run(out, "", tb));
  {
    EventFileWriter w((dir.root / "logs" / "validation").string());
    w.scalar("epoch_loss", 0.5, 0);
  }
  CHECK_NOTHROW(check_output_holds_no_run(out, "", with("")));  // without the callback: not this run's files
  CHECK_THROWS_WITH(check_output_holds_no_run(out, "", tb),
                    Catch::Contains("holds an earlier run (logs/ (TensorBoard event files))"));
}

TEST_CASE("bad --resume checkpoints are user errors", "[resume]") {
  fs::path dir = temp_dir("resume_bad");
  std::ofstream(dir / "c.yaml") << config(dir / "run", 1);
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu", dir) == 0);
  std::ofstream(dir / "text.h5") << "not a checkpoint\n";
  const std::string whole = slurp(dir / "run" / "last.h5");
  std::ofstream(dir / "half.h5", std::ios::binary) << whole.substr(0, whole.size() / 2);
  // Another model, also with another optimizer and learning rate: the model
  // is what the error names, with no warnings about settings before it.
  std::string other = config(dir / "run2", 1);
  other.replace(other.find("filters: 16"), 11, "filters: 12");
  other.replace(other.find("{type: Adam, learning_rate: 0.003}"), 34, "{type: SGD, learning_rate: 0.001}");
  std::ofstream(dir / "other.yaml") << other;
  // Edited training state (fuzzed: -1 crashed, NaN and 1e300 ran 2^32 epochs).
  const Checkpoint good = load_checkpoint((dir / "run" / "last.h5").string());
  REQUIRE(good.state_arrays.count("best_params"));
  auto edited = [&](const std::string& file, auto edit) {
    Checkpoint c = good;
    edit(c);
    save_checkpoint((dir / file).string(), c);
    return (dir / file).string();
  };
  struct Row {
    std::string args, expected;
  };
  const std::string cfg = "--config " + (dir / "c.yaml").string() + " --gpus cpu --resume ";
  const std::string more = "--config " + (dir / "c.yaml").string() + " --gpus cpu --epochs 3 --output " +
                           (dir / "fresh").string() + " --resume ";
  const std::vector<Row> rows = {
      {more + edited("neg.h5", [](Checkpoint& c) { c.state_scalars["next_step"] = -1; }),
       "neg.h5: training state 'next_step' is -1, which no run writes; the file is damaged or was edited"},
      {more + edited("nan.h5", [](Checkpoint& c) { c.state_scalars["next_epoch"] = std::nan(""); }),
       "training state 'next_epoch' is nan"},
      // Flipped bytes in optimizer_m resumed silently into NaN weights.
      {more + edited("nan_moment.h5", [](Checkpoint& c) { c.state_arrays.at("optimizer_m")[0] = std::nanf(""); }),
       "nan_moment.h5: training state 'optimizer_m' holds nan at index 0; the training that wrote it diverged"},
      {more + edited("huge.h5", [](Checkpoint& c) { c.state_scalars["next_epoch"] = 1e300; }),
       "training state 'next_epoch' is 1e+300"},
      {more + edited("half_epoch.h5", [](Checkpoint& c) { c.state_scalars["next_epoch"] = 2.5; }),
       "'next_epoch' is 2.5, not a whole number"},
      // An edited next_step logged a made-up epoch (loss 0, mean_iou 1).
      {more + edited("steps.h5", [](Checkpoint& c) { c.state_scalars["next_step"] = 1000; }),
       "steps.h5: training state 'next_step' is 1000 with 'epoch_samples' 0, which no run writes"},
      {more + edited("iters.h5", [](Checkpoint& c) { c.state_scalars["optimizer_iterations"] = -5; }),
       "training state 'optimizer_iterations' is -5"},
      {more + edited("best.h5", [](Checkpoint& c) { c.state_arrays["best_params"].resize(3); }),
       "the kept best weights (training_state/best_params, best_state) hold 3 + "},
      {more + edited("counts.h5", [](Checkpoint& c) { c.state_double_arrays["epoch_counts"].resize(7); }),
       "training state 'epoch_counts' holds 7 metric counts where this model keeps 25; the file is damaged"},
      {more + edited("neg_count.h5", [](Checkpoint& c) { c.state_double_arrays["epoch_counts"][3] = -2; }),
       "training state 'epoch_counts' entry 3 is -2, which no run writes"},
      {cfg + (dir / "missing.h5").string(), "cannot read checkpoint"},
      {cfg + (dir / "text.h5").string(), "is not an HDF5 file"},
      {cfg + (dir / "half.h5").string(), "damaged or truncated"},
      {cfg + (dir / "run" / "final.h5").string(), "holds no optimizer state"},
      {"--config " + (dir / "other.yaml").string() + " --gpus cpu --resume " + (dir / "run" / "last.h5").string(),
       "is [3, 3, 8, 16] there, [3, 3, 8, 12] in the model; the checkpoint was written for another model"},
  };
  for (const auto& row : rows) {
    INFO(row.args);
    CHECK(run(row.args, dir) == 2);
    CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains(row.expected) && !Catch::Contains("resuming with other settings"));
  }
  // Files written before 2026-12-02 hold the counts as scalars epoch_count_0..24: still read.
  const std::string old_format = edited("old_format.h5", [](Checkpoint& c) {
    const std::vector<double> counts = c.state_double_arrays.at("epoch_counts");
    c.state_double_arrays.erase("epoch_counts");
    for (size_t i = 0; i < counts.size(); ++i) c.state_scalars["epoch_count_" + std::to_string(i)] = counts[i];
  });
  CHECK(run(more + old_format, dir) == 0);
  fs::remove_all(dir);
}

TEST_CASE("amsgrad resumes with its vhat slot, also from a file that named it v_hat", "[resume]") {
  fs::path dir = temp_dir("resume_vhat");
  auto amsgrad = [&](const fs::path& out, int epochs) {
    std::string c = config(out, epochs);
    const std::string adam = "{type: Adam, learning_rate: 0.003}";
    // beta_2 0.5: v falls between steps, so vhat (its maximum) is not v.
    return c.replace(c.find(adam), adam.size(), "{type: Adam, learning_rate: 0.003, amsgrad: true, beta_2: 0.5}");
  };
  std::ofstream(dir / "full.yaml") << amsgrad(dir / "full", 2);
  std::ofstream(dir / "part.yaml") << amsgrad(dir / "part", 2);
  REQUIRE(run("--config " + (dir / "full.yaml").string() + " --gpus cpu --threads 2", dir) == 0);
  REQUIRE(run("--config " + (dir / "part.yaml").string() + " --gpus cpu --threads 2 --epochs 1", dir) == 0);
  const std::string last = (dir / "part" / "last.h5").string();
  Checkpoint c = load_checkpoint(last);
  REQUIRE(c.state_arrays.count("optimizer_vhat"));
  // The same checkpoint with vhat zeroed must end elsewhere, or the comparison below proves nothing.
  fs::copy(dir / "part", dir / "zero", fs::copy_options::recursive);
  Checkpoint zeroed = c;
  std::fill(zeroed.state_arrays.at("optimizer_vhat").begin(), zeroed.state_arrays.at("optimizer_vhat").end(), 0.f);
  save_checkpoint((dir / "zero" / "last.h5").string(), zeroed);
  std::ofstream(dir / "zero.yaml") << amsgrad(dir / "zero", 2);
  REQUIRE(run("--config " + (dir / "zero.yaml").string() + " --gpus cpu --threads 2 --resume " +
                  (dir / "zero" / "last.h5").string(),
              dir) == 0);
  // The name of 2026-12-03's files.
  c.state_arrays["optimizer_v_hat"] = c.state_arrays.at("optimizer_vhat");
  c.state_arrays.erase("optimizer_vhat");
  save_checkpoint(last, c);
  REQUIRE(run("--config " + (dir / "part.yaml").string() + " --gpus cpu --threads 2 --resume " + last, dir) == 0);
  require_same_weights(dir / "full" / "final.h5", dir / "part" / "final.h5");
  const Checkpoint full = load_checkpoint((dir / "full" / "final.h5").string()),
                   zero = load_checkpoint((dir / "zero" / "final.h5").string());
  bool differs = false;
  for (size_t i = 0; i < full.weights.size(); ++i) differs = differs || full.weights[i].values != zero.weights[i].values;
  CHECK(differs);
  fs::remove_all(dir);
}

TEST_CASE("resuming with other settings warns, another optimizer type is an error", "[resume]") {
  fs::path dir = temp_dir("resume_settings");
  std::ofstream(dir / "c.yaml") << config(dir / "run", 2);
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu", dir) == 0);
  const std::string last = (dir / "run" / "last.h5").string();
  std::string lr = config(dir / "run", 3);
  lr.replace(lr.find("learning_rate: 0.003"), 20, "learning_rate: 0.001");
  std::ofstream(dir / "lr.yaml") << lr;
  CHECK(run("--config " + (dir / "lr.yaml").string() + " --gpus cpu --resume " + last, dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("training.optimizer.learning_rate is 0.001 (the checkpoint's "
                                                     "run used 0.003)"));
  // Another input size loads (the weights fit), with a warning (from fuzzing: it was silent).
  std::string big = config(dir / "run", 3);
  big.replace(big.find("shape: [48, 48, 3]"), 18, "shape: [64, 64, 3]");
  std::ofstream(dir / "big.yaml") << big;
  CHECK(run("--config " + (dir / "big.yaml").string() + " --gpus cpu --overwrite --resume " + last, dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("the Input shape is [64, 64, 3] (the checkpoint's run used "
                                                     "[48, 48, 3])"));
  // A layer setting without weights of its own (here dilation_rate) loads too, with a warning.
  std::string dilated = config(dir / "run", 3);
  const std::string c1 = "padding: same, activation: relu}";
  dilated.replace(dilated.find(c1), c1.size(), "padding: same, activation: relu, dilation_rate: 2}");
  std::ofstream(dir / "dilated.yaml") << dilated;
  CHECK(run("--config " + (dir / "dilated.yaml").string() + " --gpus cpu --overwrite --resume " + last, dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"),
             Catch::Contains("layer 'c1' is {activation: relu, dilation_rate: 2, filters: 8, kernel_size: 3, name: c1, "
                             "padding: same, type: Conv2D} (the checkpoint's run used {activation: relu, filters: 8, "
                             "kernel_size: 3, name: c1, padding: same, type: Conv2D})"));
  std::string sgd = config(dir / "run", 3);
  sgd.replace(sgd.find("{type: Adam, learning_rate: 0.003}"), 34, "{type: SGD, learning_rate: 0.003}");
  std::ofstream(dir / "sgd.yaml") << sgd;
  CHECK(run("--config " + (dir / "sgd.yaml").string() + " --gpus cpu --resume " + last, dir) == 2);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("was trained with the Adam optimizer, the config says SGD"));
  // amsgrad's running maximum of v is state the checkpoint does not hold.
  std::string amsgrad = config(dir / "run", 3);
  amsgrad.replace(amsgrad.find("{type: Adam, learning_rate: 0.003}"), 34,
                  "{type: Adam, learning_rate: 0.003, amsgrad: true}");
  std::ofstream(dir / "amsgrad.yaml") << amsgrad;
  CHECK(run("--config " + (dir / "amsgrad.yaml").string() + " --gpus cpu --resume " + last, dir) == 2);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("was trained with amsgrad false, the config says true") &&
                                         Catch::Contains("set training.optimizer.amsgrad to false to resume"));
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint in a subfolder of the output folder resumes in place", "[resume]") {
  fs::path dir = temp_dir("resume_sub");
  std::ofstream(dir / "c.yaml") << config(dir / "run", 2, "    - {type: ModelCheckpoint, filepath: 'ck/ep{epoch}.h5'}\n");
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu", dir) == 0);
  const std::string full_log = slurp(dir / "run" / "log.csv");
  // Into another folder from the subfolder's checkpoint: the log rows come from the run's log.csv, one level up.
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --output " + (dir / "branch").string() +
                  " --resume " + (dir / "run" / "ck" / "ep1.h5").string(),
              dir) == 0);
  CHECK(slurp(dir / "branch" / "log.csv") == full_log);  // epoch 1's row copied, epoch 2's trained again
  // In place, epoch 2 would be overwritten: only with --overwrite.
  const std::string in_place = "--config " + (dir / "c.yaml").string() + " --gpus cpu --resume " +
                               (dir / "run" / "ck" / "ep1.h5").string();
  CHECK(run(in_place, dir) == 2);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("would overwrite the run's later epochs (log.csv holds 2;"));
  // So is it when this config has no ModelCheckpoint: the run folder comes from the checkpoint's own config.
  std::ofstream(dir / "nock.yaml") << config(dir / "run", 2);
  CHECK(run("--config " + (dir / "nock.yaml").string() + " --gpus cpu --resume " +
                (dir / "run" / "ck" / "ep1.h5").string(),
            dir) == 2);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("would overwrite the run's later epochs (log.csv holds 2;"));
  REQUIRE(run(in_place + " --overwrite", dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("resuming from") && !Catch::Contains("holds an earlier run"));
  CHECK(slurp(dir / "run" / "log.csv") == full_log);
  // Into the checkpoint's own subfolder, which holds no run files: a branch too, not the run resumed in place.
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --output " + (dir / "run" / "ck").string() +
                  " --resume " + (dir / "run" / "ck" / "ep1.h5").string(),
              dir) == 0);
  CHECK(slurp(dir / "run" / "ck" / "log.csv") == full_log);
  CHECK(slurp(dir / "run" / "log.csv") == full_log);
  fs::remove_all(dir);
}

TEST_CASE("ModelCheckpoint with save_weights_only writes the weights only: evaluate reads it, --resume refuses it",
          "[resume]") {
  fs::path dir = temp_dir("resume_weights_only");
  std::ofstream(dir / "c.yaml") << config(dir / "run", 2,
                                          "    - {type: ModelCheckpoint, filepath: 'w{epoch}.h5', save_weights_only: "
                                          "true, save_freq: epoch}\n");
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu", dir) == 0);
  const Checkpoint last = load_checkpoint((dir / "run" / "last.h5").string());
  const Checkpoint weights = load_checkpoint((dir / "run" / "w2.h5").string());
  REQUIRE(last.state_scalars.count("optimizer_iterations"));
  CHECK(weights.state_scalars.empty());
  CHECK(weights.state_arrays.empty());
  CHECK(weights.state_double_arrays.empty());
  CHECK(weights.epoch == 2);
  CHECK(weights.logs == last.logs);
  CHECK(weights.config_yaml == last.config_yaml);
  REQUIRE(weights.weights.size() == last.weights.size());
  for (size_t i = 0; i < last.weights.size(); ++i) {
    INFO(last.weights[i].layer << "/" << last.weights[i].name);
    CHECK(weights.weights[i].values == last.weights[i].values);  // the same epoch's weights, bit for bit
  }
  CHECK(fs::file_size(dir / "run" / "w2.h5") < fs::file_size(dir / "run" / "last.h5"));
  CHECK(run("evaluate --checkpoint " + (dir / "run" / "w1.h5").string() + " --images " + kSample + "/images --masks " +
                kSample + "/masks --gpus cpu",
            dir) == 0);
  CHECK_THAT(slurp(dir / "out.txt"), Catch::Contains("mean_iou: "));
  CHECK(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --epochs 3 --resume " +
                (dir / "run" / "w2.h5").string(),
            dir) == 2);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("w2.h5 holds no optimizer state (a weights-only file: final.h5, "
                                                     "or a ModelCheckpoint file with save_weights_only: true): "
                                                     "continue its run with --resume " +
                                                     (dir / "run" / "last.h5").string() +
                                                     " (with a higher --epochs once it has finished), or, instead of "
                                                     "--resume, start a new run from its weights with "
                                                     "--initial-weights " + (dir / "run" / "w2.h5").string() +
                                                     " and another --output"));
  CHECK_THAT(slurp(dir / "out.txt"), !Catch::Contains("Total params"));  // the error is the last thing printed
  fs::remove_all(dir);
}

TEST_CASE("resuming keeps only the log rows of the checkpoint's epochs, in any folder", "[resume]") {
  fs::path dir = temp_dir("resume_log");
  std::ofstream(dir / "c.yaml") << config(dir / "run", 4, "    - {type: ModelCheckpoint, filepath: 'ep{epoch}.h5'}\n");
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --seed 9", dir) == 0);
  const std::string full_log = slurp(dir / "run" / "log.csv");
  // The checkpoints store the overridden seed, so resuming with it warns of nothing.
  CHECK_THAT(load_checkpoint((dir / "run" / "ep2.h5").string()).config_yaml, Catch::Contains("seed: 9"));
  // Back to epoch 2 in the same folder would drop epochs 3 and 4 (a user lost them so): refused, nothing
  // touched...
  const std::string back = "--config " + (dir / "c.yaml").string() + " --gpus cpu --seed 9 --resume " +
                           (dir / "run" / "ep2.h5").string();
  const std::string last_before = slurp(dir / "run" / "last.h5");
  CHECK(run(back, dir) == 2);
  CHECK_THAT(slurp(dir / "err.txt"),
             Catch::Contains("resuming " + (dir / "run" / "ep2.h5").string() + " (epoch 2) in its run's folder '" +
                             (dir / "run").string() + "' would overwrite the run's later epochs (log.csv holds 4;") &&
                 Catch::Contains("--resume " + (dir / "run" / "last.h5").string()) &&
                 Catch::Contains("another --output") && Catch::Contains("--overwrite"));
  CHECK(slurp(dir / "run" / "log.csv") == full_log);
  CHECK(slurp(dir / "run" / "last.h5") == last_before);
  // ...until --overwrite: rows 3 and 4 are dropped, then written again.
  REQUIRE(run(back + " --overwrite", dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"), !Catch::Contains("other settings"));
  CHECK(slurp(dir / "run" / "log.csv") == full_log);
  // Into a new folder: the rows of epochs 1 and 2 come from the log beside the checkpoint.
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --seed 9 --output " + (dir / "moved").string() +
                  " --resume " + (dir / "run" / "ep2.h5").string(),
              dir) == 0);
  CHECK(slurp(dir / "moved" / "log.csv") == full_log);
  // Into that folder again, now another run's: refused, nothing touched...
  std::ofstream(dir / "moved" / "log.csv") << "epoch,loss\n0,9.99\n";  // marks moved's own log
  const std::string moved = "--config " + (dir / "c.yaml").string() + " --gpus cpu --seed 9 --output " +
                            (dir / "moved").string() + " --resume " + (dir / "run" / "ep2.h5").string();
  CHECK(run(moved, dir) == 2);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("resuming " + (dir / "run" / "ep2.h5").string() +
                                                     " there would overwrite") &&
                                         Catch::Contains("--overwrite") && !Catch::Contains("continue it") &&
                                         Catch::Contains("resume in the checkpoint's own run folder (--output " +
                                                         (dir / "run").string() + " when it holds that run)"));
  CHECK(slurp(dir / "moved" / "log.csv") == "epoch,loss\n0,9.99\n");
  // ...until --overwrite, which takes the rows of the checkpoint's run, not moved's.
  REQUIRE(run(moved + " --overwrite", dir) == 0);
  CHECK(slurp(dir / "moved" / "log.csv") == full_log);
  // Nothing left to train: a warning, no files.
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --seed 9 --output " + (dir / "none").string() +
                  " --resume " + (dir / "run" / "last.h5").string(),
              dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("has already trained 4 epoch(s)"));
  CHECK_FALSE(fs::exists(dir / "none"));
  // The same with --log-format json ends stdout with its final object too.
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --seed 9 --output " + (dir / "none").string() +
                  " --resume " + (dir / "run" / "last.h5").string() + " --log-format json",
              dir) == 0);
  CHECK(slurp(dir / "out.txt") ==
        "{\"done\": true, \"epochs_run\": 4, \"stopped_early\": false, \"stop_signal\": 0, \"files\": []}\n");
  fs::remove_all(dir);
}

TEST_CASE("a stop asked for in the last epoch still ends the run with final.h5", "[resume]") {
  // From a multi-process trial: SIGTERM in the last epoch left no final.h5, and the --resume it offered found
  // nothing left to train. One step an epoch: a signal in epoch 2 is seen only after it, the last.
  fs::path dir = temp_dir("resume_last_epoch");
  std::string text = config(dir / "run", 2);
  std::ofstream(dir / "c.yaml") << text.replace(text.find("batch_size: 3"), 13, "batch_size: 64");
  for (int attempt = 0;; ++attempt) {
    fs::remove_all(dir / "run");
    Child c = start("--config " + (dir / "c.yaml").string() + " --gpus cpu", dir);
    wait_for_lines(dir / "run" / "log.csv", 2, 60);  // the header and epoch 1: epoch 2 is about to run
    while (!fs::exists(dir / "run" / "last.h5")) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    kill(c.pid, SIGTERM);
    const int code = wait_exit(c);
    INFO(slurp(dir / "err.txt"));
    // Still at epoch 1's end (its last.h5 just renamed, the stop not yet asked): stopped there, rightly.
    if (code == 143 && load_checkpoint((dir / "run" / "last.h5").string()).epoch == 1 && attempt < 4) continue;
    CHECK(code == 0);
    CHECK(fs::exists(dir / "run" / "final.h5"));
    if (fs::exists(dir / "run" / "final.h5")) CHECK(load_checkpoint((dir / "run" / "final.h5").string()).epoch == 2);
    break;
  }
  fs::remove_all(dir);
}

TEST_CASE("a resume with --overwrite never removes the checkpoint it resumes from", "[resume]") {
  // A ModelCheckpoint file ck/best.h5 in a folder without the run's other files is a branch of
  // its own folder, and --overwrite removed it as the earlier run's best.h5.
  fs::path dir = temp_dir("resume_keeps_source");
  const std::string ck = "    - {type: ModelCheckpoint, filepath: ck/best.h5}\n";
  std::ofstream(dir / "one.yaml") << config(dir / "one", 1, ck);
  REQUIRE(run("--config " + (dir / "one.yaml").string() + " --gpus cpu", dir) == 0);
  fs::create_directories(dir / "two" / "ck");
  fs::copy_file(dir / "one" / "ck" / "best.h5", dir / "two" / "ck" / "best.h5");
  std::ofstream(dir / "two.yaml") << config(dir / "two", 2, ck);
  REQUIRE(run("--config " + (dir / "two.yaml").string() + " --gpus cpu --overwrite --resume " +
                  (dir / "two" / "ck" / "best.h5").string(),
              dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"), !Catch::Contains("removed the earlier run's ck/best.h5"));
  CHECK(fs::exists(dir / "two" / "final.h5"));
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint of a run without training.optimizer from before RMSprop became the default says how to "
          "resume it", "[resume]") {
  fs::path dir = temp_dir("resume_old_default");
  std::string text = config(dir / "run", 2);
  text.replace(text.find("optimizer: {type: Adam, learning_rate: 0.003}"), 45, "optimizer: {type: SGD}");
  std::ofstream(dir / "c.yaml") << text;
  REQUIRE(run("--config " + (dir / "c.yaml").string() + " --gpus cpu --epochs 1", dir) == 0);
  // As the old default wrote it: SGD(0.01) with no slots, and a stored config without the key.
  Checkpoint old = load_checkpoint((dir / "run" / "last.h5").string());
  const std::string key = "  optimizer: {type: SGD}\n";
  REQUIRE(old.config_yaml.find(key) != std::string::npos);
  old.config_yaml.erase(old.config_yaml.find(key), key.size());
  save_checkpoint((dir / "run" / "last.h5").string(), old);
  text.erase(text.find(key), key.size());
  std::ofstream(dir / "now.yaml") << text;
  CHECK(run("--config " + (dir / "now.yaml").string() + " --gpus cpu --resume " + (dir / "run" / "last.h5").string(),
            dir) == 2);
  CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("its run's config names no optimizer and it holds no optimizer "
                                                     "slots: it trained with SGD (learning rate 0.01), the default "
                                                     "when it was written") &&
                                         Catch::Contains("set training.optimizer.type to SGD"));
  // Following that advice resumes it.
  std::string sgd = text;
  sgd.replace(sgd.find("  output_dir:"), 0, "  optimizer: SGD\n");
  std::ofstream(dir / "sgd.yaml") << sgd;
  CHECK(run("--config " + (dir / "sgd.yaml").string() + " --gpus cpu --resume " + (dir / "run" / "last.h5").string(),
            dir) == 0);
  CHECK_THAT(slurp(dir / "err.txt"), !Catch::Contains("resuming with other settings"));
  fs::remove_all(dir);
}

TEST_CASE("a final.h5 left from an earlier finish is replaced when the run is found finished", "[resume]") {
  // From a hostile trial: train 1 epoch; resume with --epochs 2 and SIGKILL it while final.h5.tmp-* is
  // written; the same resume again said "nothing to do" and kept epoch 1's final.h5 beside epoch 2's
  // last.h5 and log.csv, and the temporary. The kill is stood in for by putting both back.
  fs::path dir = temp_dir("resume_stale_final");
  std::ofstream(dir / "c.yaml") << config(dir / "run", 1);
  const std::string cfg = "--config " + (dir / "c.yaml").string() + " --gpus cpu";
  REQUIRE(testing::run_trainer(cfg, dir).code == 0);
  fs::copy_file(dir / "run" / "final.h5", dir / "epoch1_final.h5");
  const std::string resume = cfg + " --epochs 2 --resume " + (dir / "run" / "last.h5").string();
  REQUIRE(testing::run_trainer(resume, dir).code == 0);
  fs::copy_file(dir / "epoch1_final.h5", dir / "run" / "final.h5", fs::copy_options::overwrite_existing);
  const fs::path temporary = dir / "run" / "final.h5.tmp-999999999";  // of a process that is gone
  std::ofstream(temporary) << "half a checkpoint";
  const testing::Run again = testing::run_trainer(resume, dir);
  INFO(again.out << again.err);
  CHECK(again.code == 0);
  CHECK_THAT(again.err, Catch::Contains("holds no final.h5 of its last epoch"));
  const Checkpoint final = load_checkpoint((dir / "run" / "final.h5").string());
  CHECK(final.epoch == 2);
  CHECK(final.state_scalars.at("trained_epochs") == 2);
  CHECK_FALSE(fs::exists(temporary));
  // Found finished once more, the final.h5 now current is kept.
  const auto written = fs::last_write_time(dir / "run" / "final.h5");
  CHECK(testing::run_trainer(resume, dir).code == 0);
  CHECK(fs::last_write_time(dir / "run" / "final.h5") == written);
  fs::remove_all(dir);
}

TEST_CASE("a run resumes after auc was added to or removed from training.metrics", "[resume][metrics]") {
  // The checkpoint's metric counts are 400 longer with auc (its histogram): that is no damage.
  fs::path dir = temp_dir("resume_auc");
  std::string with_auc = config(dir / "run", 1);
  with_auc.replace(with_auc.find("metrics: [mean_iou]"), 19, "metrics: [mean_iou, AUC]");
  std::ofstream(dir / "auc.yaml") << with_auc;
  std::ofstream(dir / "plain.yaml") << config(dir / "run", 1);
  REQUIRE(testing::run_trainer("--config " + (dir / "auc.yaml").string() + " --gpus cpu", dir).code == 0);
  const std::string last = (dir / "run" / "last.h5").string();
  testing::Run r = testing::run_trainer("--config " + (dir / "plain.yaml").string() + " --gpus cpu --epochs 2 --resume " +
                                            last, dir);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  r = testing::run_trainer("--config " + (dir / "auc.yaml").string() + " --gpus cpu --epochs 3 --resume " + last, dir);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  // The last epoch (trained with auc again) logged its value.
  const std::string log = slurp(dir / "run" / "log.csv");
  const std::string header = log.substr(0, log.find('\n'));
  REQUIRE(header.rfind("epoch,auc,", 0) == 0);
  const std::string last_row = log.substr(log.rfind('\n', log.size() - 2) + 1);
  CHECK(last_row.rfind("2,", 0) == 0);
  CHECK(last_row.compare(2, 3, "NA,") != 0);
  fs::remove_all(dir);
}
