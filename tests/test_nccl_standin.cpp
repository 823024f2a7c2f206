// Many NCCL ranks on one GPU, through the NCCL stand-in (tests/nccl_standin):
// the real NcclCommunicator (its events, streams, bucket tickets, polling and
// timeouts) and Trainer run with 2, 4 and 8 ranks on the one GPU a lent
// machine has. These cases run under LD_PRELOAD of the stand-in (ctest -L
// multigpu, bench/gpu_check_device.sh) on a GPU; elsewhere they skip with a
// warning saying which is missing.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "dist/nccl_communicator.h"
#include "gpu_testing.h"
#include "process_testing.h"
#include "tiny_model.h"
#include "train/trainer.h"

using namespace trainer;
using namespace trainer::testing;

#define TRAINER_REQUIRE_STANDIN()                                                                                    \
  do {                                                                                                               \
    TRAINER_REQUIRE_GPU();                                                                                           \
    if (!nccl_allows_shared_gpus()) {                                                                                \
      WARN("skipped: the NCCL stand-in is not loaded (run under LD_PRELOAD=build/tests/libnccl_standin.so, as "      \
           "ctest -L multigpu does)");                                                                               \
      return;                                                                                                        \
    }                                                                                                                \
  } while (0)

namespace {

/// Sets the stand-in's knob TRAINER_NCCL_STANDIN_<name> for the scope (read when a communicator is made).
class Knob {
 public:
  Knob(const std::string& name, const std::string& value) : name_("TRAINER_NCCL_STANDIN_" + name) {
    setenv(name_.c_str(), value.c_str(), 1);
  }
  ~Knob() { unsetenv(name_.c_str()); }
  Knob(const Knob&) = delete;
  Knob& operator=(const Knob&) = delete;

 private:
  std::string name_;
};

/// Batches of 5, 5, 3 and 2 samples and a shuffled 5: uneven shards, and over 4 or 8 towers empty ones.
const std::vector<std::vector<int>> kBatches = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}, {3, 9}, {12, 0, 7, 2, 5}};

/// fp32 GPU training against the CPU (test_gpu_training.cpp's tolerances).
constexpr double kLossTol = 1e-3, kWeightTol = 1e-3;

struct Result {
  std::vector<double> losses;
  std::vector<float> params;
  std::string reduction;
};

/// "0,0,...": n towers on GPU 0.
std::string gpu0_times(int n) {
  std::string s = "0";
  for (int i = 1; i < n; ++i) s += ",0";
  return s;
}

/// kBatches on a fresh Trainer of yaml over the towers of spec (as --gpus), fp32; every tower must hold the
/// same bits afterwards.
Result train(const std::string& yaml, const std::string& spec) {
  Config config = parse_config(yaml, "standin.yaml");
  config.training.precision = Precision::FP32;
  config.training.collective_timeout = 60;
  const Dataset data = tiny_data();
  Trainer t(config, plan_devices(spec, list_gpus(), true), 1);
  Result r;
  for (const auto& b : kBatches) r.losses.push_back(t.train_step(data, b).loss());
  r.params = t.params(0);
  for (int k = 1; k < t.towers(); ++k) CHECK(t.params(k) == r.params);
  r.reduction = t.devices().reduction();
  return r;
}

void check_close(const Result& gpu, const Result& cpu) {
  REQUIRE(gpu.losses.size() == cpu.losses.size());
  for (size_t i = 0; i < cpu.losses.size(); ++i) CHECK(gpu.losses[i] == Approx(cpu.losses[i]).epsilon(kLossTol));
  const double w = max_rel_diff(gpu.params, cpu.params);
  INFO("weights: max |gpu - cpu| / max(1, |cpu|) = " << w);
  CHECK(w <= kWeightTol);
}

/// tiny_config(synchronized) with `keys` added to its optimizer (e.g. ", global_clipnorm: 0.5").
std::string tiny_with(bool synchronized, const std::string& keys) {
  std::string yaml = tiny_config(synchronized);
  const std::string anchor = "nesterov: true";
  yaml.insert(yaml.find(anchor) + anchor.size(), keys);
  return yaml;
}

}  // namespace

TEST_CASE("2, 4 and 8 NCCL ranks on GPU 0 reach the CPU's weights, with synchronized BN, clipping and empty towers",
          "[gpu][standin]") {
  TRAINER_REQUIRE_STANDIN();
  struct Variant {
    const char* name;
    std::string yaml;
    bool synchronized;
  };
  const std::vector<Variant> variants = {{"synchronized BN", tiny_config(true), true},
                                         {"per-tower BN", tiny_config(false), false},
                                         {"global_clipnorm", tiny_with(true, ", global_clipnorm: 0.05"), true},
                                         {"clipnorm", tiny_with(true, ", clipnorm: 0.02"), true}};
  for (const Variant& v : variants) {
    // Synchronized BN: N towers train as one (the oracle is one CPU tower); per-tower BN: as N CPU towers.
    const Result one = train(v.yaml, "cpu");
    for (int n : {2, 4, 8}) {
      INFO(v.name << ", " << n << " ranks on GPU 0");
      const Result gpu = train(v.yaml, gpu0_times(n));
      CHECK(gpu.reduction.find("NCCL") != std::string::npos);
      check_close(gpu, v.synchronized ? one : train(v.yaml, "cpu:" + std::to_string(n)));
    }
  }
}

TEST_CASE("a collective the compute stream waits for does not queue behind a gradient bucket in flight",
          "[gpu][standin]") {
  TRAINER_REQUIRE_STANDIN();
  // At a modeled 2 MB/s, a 4 MiB bucket's all-reduce over 2 ranks takes 2 s once both have arrived, while
  // 16 floats (a synchronized BN layer's sums during backward) take 32 us. On the bucket's stream the small
  // one would wait the 2 s.
  Knob bus("BUS_GBPS", "0.002");
  GpuDevice a(0, Precision::FP32), b(0, Precision::FP32);
  auto comm = make_nccl_communicator({a.device, b.device}, 60);
  using Clock = std::chrono::steady_clock;
  std::vector<double> small_s(2), bucket_s(2);
  std::vector<std::vector<float>> small_sum(2), bucket_sum(2);
  run_ranks(2, [&](int r) {
    DeviceContext& ctx = *(r == 0 ? a : b).ctx;
    DeviceBuffer<float> bucket(ctx, std::vector<float>(size_t(1) << 20, float(r + 1)));
    DeviceBuffer<float> small(ctx, std::vector<float>(16, float(r + 1)));
    const auto start = Clock::now();
    comm->start_all_reduce_sum(r, bucket.p, bucket.n);
    comm->all_reduce_sum(r, small.p, small.n);
    small_sum[size_t(r)] = small.read();  // waits for the compute stream, which waits for the small one only
    small_s[size_t(r)] = std::chrono::duration<double>(Clock::now() - start).count();
    comm->wait_all(r);
    comm->synchronize(r);
    bucket_sum[size_t(r)] = bucket.read();
    bucket_s[size_t(r)] = std::chrono::duration<double>(Clock::now() - start).count();
  });
  for (size_t r = 0; r < 2; ++r) {
    INFO("rank " << r << ": the small all-reduce after " << small_s[r] << " s, the bucket after " << bucket_s[r]
                 << " s");
    CHECK(small_sum[r] == std::vector<float>(16, 3.f));
    CHECK(bucket_sum[r].back() == 3.f);
    CHECK(bucket_s[r] >= 1.5);  // the bucket really was in flight
    CHECK(small_s[r] < 1.0);
  }
}

TEST_CASE("a random delay before every collective of the stand-in changes no weight", "[gpu][standin]") {
  TRAINER_REQUIRE_STANDIN();
  const Result cpu = train(tiny_config(true), "cpu");
  for (int n : {2, 8}) {
    INFO(n << " ranks on GPU 0, each collective delayed up to 2 ms");
    Knob delay("DELAY_US", "2000"), seed("SEED", std::to_string(n));
    check_close(train(tiny_config(true), gpu0_times(n)), cpu);
  }
  INFO("every call and init answering ncclInProgress 3 times first");
  Knob in_progress("IN_PROGRESS", "3");
  check_close(train(tiny_config(true), gpu0_times(4)), cpu);
}

TEST_CASE("an asynchronous NCCL error and a rank that never arrives end the step within collective_timeout",
          "[gpu][standin]") {
  TRAINER_REQUIRE_STANDIN();
  Config config = parse_config(tiny_config(true), "standin.yaml");
  config.training.precision = Precision::FP32;
  config.training.collective_timeout = 5;
  const Dataset data = tiny_data();
  struct Fault {
    const char* knob;
    const char* value;
    const char* says;
  };
  for (const Fault& f : {Fault{"ERROR_AFTER", "4", "remote process exited"},
                         Fault{"ABSENT", "2,4", "timed out after 5 s"}}) {
    INFO("TRAINER_NCCL_STANDIN_" << f.knob << "=" << f.value);
    Knob knob(f.knob, f.value);
    Trainer t(config, plan_devices(gpu0_times(4), list_gpus(), true), 1);
    const auto start = std::chrono::steady_clock::now();
    try {
      for (int step = 0; step < 10; ++step) t.train_step(data, kBatches[size_t(step) % kBatches.size()]);
      FAIL("the fault did not end the run");
    } catch (const InternalError& e) {
      const std::string msg = e.what();
      CHECK_THAT(msg, Catch::Contains("NCCL") && Catch::Contains("cuda:0") && Catch::Contains(f.says));
      CHECK_THAT(msg, Catch::Contains("all_reduce_sum") || Catch::Contains("broadcast") ||
                          Catch::Contains("aborted"));
    }
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  }
}

TEST_CASE("a rank that never arrives ends a training run with exit code 1 and leaves last.h5 whole",
          "[gpu][standin]") {
  TRAINER_REQUIRE_STANDIN();
  TempDir dir("standin_fault");
  const std::filesystem::path out = dir.root / "run";
  // 32 training images in batches of 16: two steps, one gradient bucket each, per epoch.
  std::ofstream(dir.root / "c.yaml") << sample_unet_config(out, "  epochs: 1\n  batch_size: 16\n  collective_timeout: 5\n");
  const std::string config = "--config " + (dir.root / "c.yaml").string() + " --gpus 0,0,0,0 --precision fp32";
  REQUIRE(run_trainer(config, dir.root).code == 0);
  const std::string last = slurp(out / "last.h5");
  REQUIRE(!last.empty());
  // Rank 3 queues nothing after its first collective of each NCCL communicator: of the urgent one, the
  // resumed run's broadcast of the weights (the only one); of the buckets', epoch 2's first step. It misses
  // epoch 2's second step.
  Knob absent("ABSENT", "3,1");
  const auto start = std::chrono::steady_clock::now();
  const Run r = run_trainer(config + " --epochs 2 --resume " + (out / "last.h5").string(), dir.root);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("timed out after 5 s") && Catch::Contains("cuda:0"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(90));
  CHECK(slurp(out / "last.h5") == last);  // epoch 1's checkpoint, untouched
}
