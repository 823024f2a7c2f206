// Runs of several processes under Open MPI's mpirun, each with one CPU tower
// (oversubscribed, allowed as root: CI's machine), against one process with
// as many CPU towers: the same weights, one voice, the same early-stopping
// epoch, and an end within the collective timeout when a process dies or
// hangs. Skipped where the build has no MPI or mpirun is missing.
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "dist/process_group.h"
#include "io/checkpoint.h"
#include "process_testing.h"

using namespace trainer;
using namespace trainer::testing;
namespace fs = std::filesystem;

namespace {

/// Whether mpirun runs here, else why not (the skip message).
std::string mpi_missing() {
  if (!mpi_built()) return "this build has no MPI (configure with Open MPI: libopenmpi-dev)";
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) return "mpirun is not on PATH (openmpi-bin)";
  return "";
}

// Every process on this machine: no ssh needed to start them (plm isolated), and shared memory without the
// cross-process copies that containers often forbid (vader's single-copy mechanism off).
const std::string kMpirun =
    "mpirun --allow-run-as-root --oversubscribe --mca plm isolated --mca btl self,vader,tcp "
    "--mca btl_vader_single_copy_mechanism none";

/// The sample U-Net with a synchronized BatchNormalization and a Dropout (whose masks follow the global
/// sample index), 64x64 on data/sample, writing to out; `training` adds lines to the training section
/// (batch_size 6 unless they give batch_size_per_device).
std::string mpi_config(const fs::path& out, const std::string& training) {
  const std::string sample = std::string(TRAINER_SOURCE_DIR) + "/data/sample";
  return "model:\n  name: mpi_unet\n  layers:\n" + small_unet_layers() +
         R"(    - {name: bn, type: BatchNormalization, synchronized: true}
    - {name: drop, type: Dropout, rate: 0.2}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data:
  images: )" + sample + R"(/images
  masks: )" + sample + R"(/masks
  validation_split: 0.2
training:
  seed: 3
  optimizer: {type: Adam, learning_rate: 0.01}
  output_dir: )" + out.string() + "\n" +
         (training.find("batch_size_per_device") == std::string::npos ? "  batch_size: 6\n" : "") + training;
}

/// Every weight of a checkpoint, in order.
std::vector<float> all_weights(const fs::path& ckpt) {
  std::vector<float> v;
  for (const WeightRecord& w : load_checkpoint(ckpt.string()).weights) v.insert(v.end(), w.values.begin(), w.values.end());
  return v;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// The pid of the trainer process of MPI world rank `rank` whose command line holds `marker`, or 0.
pid_t rank_pid(const std::string& marker, int rank) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = slurp(e.path() / "cmdline"), env = slurp(e.path() / "environ");
    for (char& c : cmd) c = c ? c : ' ';
    if (cmd.find("mpirun") != std::string::npos || cmd.find(marker) == std::string::npos) continue;
    if (env.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') != std::string::npos)
      return pid_t(std::stol(name));
  }
  return 0;
}

}  // namespace

TEST_CASE("mpirun -np 2 with a CPU tower each reaches the weights of one process with cpu:2, rank 0 alone writing",
          "[mpi][e2e]") {
  if (const std::string why = mpi_missing(); !why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  TempDir tmp("mpi_same");
  const fs::path& dir = tmp.root;
  std::ofstream(dir / "one.yaml") << mpi_config(dir / "one", "  epochs: 2\n");
  std::ofstream(dir / "two.yaml") << mpi_config(dir / "two", "  epochs: 2\n");
  const Run one = run_trainer("--config " + (dir / "one.yaml").string() + " --gpus cpu:2 --threads 2", dir);
  REQUIRE(one.code == 0);
  const Run two = run(kMpirun, "-np 2 " + std::string(TRAINER_BINARY) + " --config " + (dir / "two.yaml").string() +
                                   " --gpus cpu --threads 1", dir);
  INFO(two.out << two.err);
  REQUIRE(two.code == 0);
  CHECK(all_weights(dir / "two" / "final.h5") == all_weights(dir / "one" / "final.h5"));
  CHECK(all_weights(dir / "two" / "last.h5") == all_weights(dir / "one" / "last.h5"));
  const std::string log_one = slurp(dir / "one" / "log.csv"), log_two = slurp(dir / "two" / "log.csv");
  CHECK(log_two == log_one);
  CHECK(count(log_two, "\n") == 3);  // the header and two epochs: one process wrote it
  // One voice: the model table, the epoch lines and the closing list once; the world once, naming both ranks.
  CHECK(count(two.out, "Model: \"mpi_unet\"") == 1);
  CHECK(count(two.out, "Epoch 2/2") == 1);
  CHECK(count(two.out, "Done: 2 epoch(s)") == 1);
  CHECK(count(two.err, "world: 2 process(es), 2 towers") == 1);
  CHECK_THAT(two.err, Catch::Contains("rank 0 on ") && Catch::Contains("rank 1 on ") &&
                          Catch::Contains("in-process, then MPI over 2 processes"));
}

TEST_CASE("under mpirun, early stopping ends every rank at the same epoch as one process does", "[mpi][e2e]") {
  if (const std::string why = mpi_missing(); !why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  TempDir tmp("mpi_early");
  const fs::path& dir = tmp.root;
  // A min_delta no epoch can beat: the stop comes after patience epochs, decided from the summed val_loss.
  // The batch per device, with the rate scaled to the towers and warmed up (the same global batch either way).
  const std::string training = R"(  epochs: 8
  batch_size_per_device: 3
  learning_rate_scaling: linear
  learning_rate_warmup_epochs: 1.5
  callbacks:
    - {type: EarlyStopping, monitor: val_loss, patience: 2, min_delta: 100}
)";
  std::ofstream(dir / "one.yaml") << mpi_config(dir / "one", training);
  std::ofstream(dir / "two.yaml") << mpi_config(dir / "two", training);
  const Run one = run_trainer("--config " + (dir / "one.yaml").string() + " --gpus cpu:2 --threads 2", dir);
  REQUIRE(one.code == 0);
  const Run two = run(kMpirun, "-np 2 " + std::string(TRAINER_BINARY) + " --config " + (dir / "two.yaml").string() +
                                   " --gpus cpu --threads 1", dir);
  INFO(two.out << two.err);
  REQUIRE(two.code == 0);  // a rank that went on alone would wait for the other until the timeout
  CHECK_THAT(one.err, Catch::Contains("early stopping at epoch 3"));
  CHECK(count(two.err, "early stopping at epoch 3") == 1);
  CHECK(count(two.out, "Done: 3 epoch(s) (early stopping)") == 1);
  CHECK(slurp(dir / "two" / "log.csv") == slurp(dir / "one" / "log.csv"));
  CHECK(all_weights(dir / "two" / "final.h5") == all_weights(dir / "one" / "final.h5"));
  // The effective global batch and learning rate, printed once at the start.
  CHECK(count(two.err, "global batch 6 over 2 tower(s) (3 per device)") == 1);
  CHECK(count(two.err, "learning rate 0.02: learning_rate 0.01 x 2 (learning_rate_scaling linear over 2 towers), "
                       "reached by a linear warm-up from 0.01 over the first 9 steps (1.5 epochs)") == 1);
}

TEST_CASE("a rank that is killed or hangs ends the run with a non-zero exit, named, and last.h5 intact",
          "[mpi][e2e]") {
  if (const std::string why = mpi_missing(); !why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  for (const int sig : {SIGKILL, SIGSTOP}) {
    DYNAMIC_SECTION((sig == SIGKILL ? "killed" : "stopped")) {
      TempDir tmp(sig == SIGKILL ? "mpi_kill" : "mpi_hang");
      const fs::path& dir = tmp.root;
      std::ofstream(dir / "run.yaml") << mpi_config(dir / "run", "  epochs: 100000\n  collective_timeout: 3\n");
      const Child c = start(kMpirun, "-np 2 " + std::string(TRAINER_BINARY) + " --config " +
                                         (dir / "run.yaml").string() + " --gpus cpu --threads 1",
                            dir / "out.txt", dir / "err.txt");
      // Both ranks train once the first epoch's checkpoint exists.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!fs::exists(dir / "run" / "log.csv") && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const pid_t victim = rank_pid((dir / "run.yaml").string(), 1);
      REQUIRE(victim > 0);
      const auto t0 = std::chrono::steady_clock::now();
      REQUIRE(kill(victim, sig) == 0);
      const int code = wait_exit(c);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (sig == SIGSTOP) kill(victim, SIGKILL);  // mpirun has ended; a stopped orphan would linger
      const std::string err = slurp(dir / "err.txt");
      INFO(err);
      CHECK(code != 0);
      CHECK(seconds < 30);  // the collective timeout (3 s) plus the launcher's teardown
      if (sig == SIGKILL)
        CHECK_THAT(err, Catch::Contains("rank 1"));  // mpirun names the process that died
      else
        CHECK_THAT(err, Catch::Contains("did not complete within 3 s") && Catch::Contains("on rank 0 of 2"));
      // The run's last checkpoint stays whole: it loads, with finite weights.
      REQUIRE(fs::exists(dir / "run" / "last.h5"));
      const Checkpoint last = load_checkpoint((dir / "run" / "last.h5").string());
      CHECK(last.epoch >= 1);
      CHECK(first_non_finite(last, true).empty());
    }
  }
}

TEST_CASE("processes that find other data (a host's copy short of a file) are refused, naming the rank",
          "[mpi][e2e]") {
  if (const std::string why = mpi_missing(); !why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  TempDir tmp("mpi_data");
  const fs::path& dir = tmp.root;
  // Rank 1's copy of data/sample lacks one pair (MPMD: each rank its own config).
  const fs::path sample = fs::path(TRAINER_SOURCE_DIR) / "data" / "sample", copy = dir / "copy";
  fs::create_directories(copy);
  fs::copy(sample / "images", copy / "images", fs::copy_options::recursive);
  fs::copy(sample / "masks", copy / "masks", fs::copy_options::recursive);
  const fs::path dropped = fs::directory_iterator(copy / "images")->path();
  fs::remove(dropped);
  fs::remove(copy / "masks" / (dropped.stem().string() + "_mask.png"));
  std::string other = mpi_config(dir / "run", "  epochs: 1\n");
  for (const std::string folder : {"images", "masks"}) {
    const std::string from = (sample / folder).string();
    other.replace(other.find(from), from.size(), (copy / folder).string());
  }
  std::ofstream(dir / "rank0.yaml") << mpi_config(dir / "run", "  epochs: 1\n");
  std::ofstream(dir / "rank1.yaml") << other;
  const std::string binary = std::string(TRAINER_BINARY) + " --gpus cpu --threads 1 --config ";
  const Run r = run(kMpirun, "-np 1 " + binary + (dir / "rank0.yaml").string() + " : -np 1 " + binary +
                                 (dir / "rank1.yaml").string(), dir);
  INFO(r.out << r.err);
  CHECK(r.code != 0);
  CHECK_THAT(r.err, Catch::Contains("rank 1 (host ") && Catch::Contains("found other image/mask pairs than rank 0"));
  CHECK_FALSE(fs::exists(dir / "run" / "last.h5"));  // refused before training
}

TEST_CASE("predict under mpirun with two processes is refused: it runs in one", "[mpi]") {
  if (const std::string why = mpi_missing(); !why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  TempDir tmp("mpi_predict");
  const Run r = run(kMpirun, "-np 2 " + std::string(TRAINER_BINARY) + " predict --checkpoint x.h5 --input x --output " +
                                 (tmp.root / "p").string(), tmp.root);
  CHECK(r.code != 0);
  CHECK_THAT(r.err, Catch::Contains("trainer predict runs in one process") && Catch::Contains("OMPI_COMM_WORLD_SIZE=2"));
}
