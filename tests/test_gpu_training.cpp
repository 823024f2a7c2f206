// Proves the GPU training path against the CPU: (a) the collectives sum,
// broadcast and ticket device buffers correctly (LocalCommunicator for two
// towers sharing GPU 0, NCCL over every visible GPU, a world of 1 with one
// GPU); (b) a small network with every layer type the U-Net uses (plus
// synchronized BatchNormalization and Dropout) follows the CPU's loss
// trajectory and reaches the CPU's weights on one GPU tower (--gpus 0) and on
// two towers sharing GPU 0 (--gpus 0,0), with and without gradient clipping
// and with the activations whose gradient needs their input, with
// GroupNormalization for BatchNormalization, with frozen layers (trainable:
// false), and evaluate() agrees. Without a GPU every case skips with a warning.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "backend/gpu_info.h"
#include "config/config.h"
#include "dist/device_plan.h"
#include "dist/local_communicator.h"
#include "dist/process_group.h"
#include "gpu_testing.h"
#include "training_compare.h"
#include "tiny_model.h"
#include "train/trainer.h"
#if defined(TRAINER_WITH_CUDA)
#include "dist/nccl_communicator.h"
#endif

using namespace trainer;
using namespace trainer::testing;

namespace {

// ---- Collectives -------------------------------------------------------------

// Values chosen so that every sum is exact in any order: small multiples of
// 1/4 in float, integers below 2^53 in double.
float float_value(int rank, size_t i) { return float(i % 1000) * 0.25f + float(rank); }
double double_value(int rank, size_t i) { return 1e12 + double(i) * 3 + double(rank); }

/// What each rank saw, downloaded after its collectives.
struct CollectiveResults {
  std::vector<std::vector<float>> sum, broadcast, bucket0, bucket1, after_wait_all;
  std::vector<std::vector<double>> dsum;
  std::vector<std::vector<int>> tickets;
  explicit CollectiveResults(int size)
      : sum(size_t(size)), broadcast(size_t(size)), bucket0(size_t(size)), bucket1(size_t(size)),
        after_wait_all(size_t(size)), dsum(size_t(size)), tickets(size_t(size)) {}
};

constexpr size_t kSumCount = (size_t(1) << 20) + 3;  // large enough to race an unordered copy; odd split
constexpr size_t kDoubleCount = 1001, kBucket0 = 4099, kBucket1 = 17;

/// Every rank r (on devices[r]) runs: a float all-reduce, a double all-reduce,
/// a broadcast from the last rank, two started buckets waited for by ticket,
/// wait_all, and one more started bucket (its ticket restarts at 0).
/// Inputs are uploaded just before each collective (queued on the compute
/// stream), results downloaded after it, as the Communicator contract allows.
CollectiveResults exercise(Communicator& comm, const std::vector<Device>& devices) {
  const int size = int(devices.size());
  CollectiveResults res(size);
  run_ranks(size, [&](int r) {
    const Device& d = devices[size_t(r)];
    auto fill = [r](size_t n, int salt) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = float_value(r + salt, i);
      return v;
    };
    Buffer<float> sum = upload(fill(kSumCount, 0), d);
    comm.all_reduce_sum(r, sum.data(), sum.size());
    res.sum[size_t(r)] = download(sum);

    std::vector<double> dh(kDoubleCount);
    for (size_t i = 0; i < kDoubleCount; ++i) dh[i] = double_value(r, i);
    Buffer<double> dsum = upload(dh, d);
    comm.all_reduce_sum(r, dsum.data(), dsum.size());
    res.dsum[size_t(r)] = download(dsum);

    Buffer<float> bc = upload(fill(kBucket0, 100), d);
    comm.broadcast(r, bc.data(), bc.size(), size - 1);
    res.broadcast[size_t(r)] = download(bc);

    Buffer<float> b0 = upload(fill(kBucket0, 10), d), b1 = upload(fill(kBucket1, 20), d);
    const int t0 = comm.start_all_reduce_sum(r, b0.data(), b0.size());
    const int t1 = comm.start_all_reduce_sum(r, b1.data(), b1.size());
    comm.wait(r, t0);
    comm.wait(r, t1);
    comm.wait_all(r);
    res.bucket0[size_t(r)] = download(b0);
    res.bucket1[size_t(r)] = download(b1);
    Buffer<float> b2 = upload(fill(kBucket1, 30), d);
    const int t2 = comm.start_all_reduce_sum(r, b2.data(), b2.size());
    comm.wait_all(r);
    res.after_wait_all[size_t(r)] = download(b2);
    res.tickets[size_t(r)] = {t0, t1, t2};
  });
  return res;
}

/// The element-wise sum over ranks of float_value(rank + salt, i).
std::vector<float> expected_sum(int size, size_t n, int salt) {
  std::vector<float> v(n, 0.f);
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < n; ++i) v[i] += float_value(r + salt, i);
  return v;
}

void check_collectives(const CollectiveResults& res, int size) {
  std::vector<double> dexp(kDoubleCount, 0.0);
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < kDoubleCount; ++i) dexp[i] += double_value(r, i);
  std::vector<float> root(kBucket0);
  for (size_t i = 0; i < kBucket0; ++i) root[i] = float_value(size - 1 + 100, i);
  const std::vector<float> sum = expected_sum(size, kSumCount, 0), b0 = expected_sum(size, kBucket0, 10),
                           b1 = expected_sum(size, kBucket1, 20), b2 = expected_sum(size, kBucket1, 30);
  for (int r = 0; r < size; ++r) {
    INFO("rank " << r << " of " << size);
    const size_t ru = size_t(r);
    CHECK_IDENTICAL("all_reduce_sum (float)", res.sum[ru], sum);
    CHECK_IDENTICAL("all_reduce_sum (double)", res.dsum[ru], dexp);
    CHECK_IDENTICAL("broadcast from the last rank", res.broadcast[ru], root);
    CHECK_IDENTICAL("started bucket 0", res.bucket0[ru], b0);
    CHECK_IDENTICAL("started bucket 1", res.bucket1[ru], b1);
    CHECK_IDENTICAL("bucket started after wait_all", res.after_wait_all[ru], b2);
    CHECK(res.tickets[ru] == std::vector<int>{0, 1, 0});
  }
}

// ---- Training ----------------------------------------------------------------

/// evaluate(): the loss, and each metric pixel count (a logit within float
/// rounding of a threshold may fall on either side of it).
constexpr double kEvalLossTol = 1e-4, kEvalCountTol = 3;

const std::string kTinyUnetConfig = trainer::testing::tiny_unet_config();

const std::string kTinySeConfig = trainer::testing::tiny_se_config();

/// Trains yaml on the CPU (fp32) and on GPU 0 and two towers of GPU 0 (in
/// precision p), checking the GPU runs' losses (loss_tol) and weight changes
/// (weight_tol) against the CPU's; returns the CPU run.
TrainRun check_gpu_follows_cpu(const std::string& yaml, Precision p, double loss_tol, double weight_tol) {
  const TrainRun cpu = train_run("cpu", Precision::FP32, yaml);
  const Config config = parse_config(yaml, "tiny.yaml");
  const std::vector<WeightRecord> initial = Trainer(config, plan("cpu"), 1).weights();  // same seed, same start
  for (const char* spec : {"0", "0,0"}) {
    INFO("--gpus " << spec);
    const TrainRun gpu = train_run(spec, p, yaml);
    check_losses(gpu.losses, cpu.losses, loss_tol);
    check_weight_changes(gpu.records, cpu.records, initial, weight_tol);
  }
  return cpu;
}

}  // namespace

TEST_CASE("LocalCommunicator sums, broadcasts and tickets buffers of two towers on GPU 0",
          "[gpu][gpu_training]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice a(0, Precision::FP32), b(0, Precision::FP32);
  LocalCommunicator comm(2, {a.device, b.device});
  check_collectives(exercise(comm, {a.device, b.device}), 2);
}

#if defined(TRAINER_WITH_CUDA)
TEST_CASE("NCCL communicator over every visible GPU (a world of 1 with one GPU)", "[gpu][gpu_training]") {
  TRAINER_REQUIRE_GPU();
  const std::vector<GpuInfo> gpus = list_gpus();
  std::vector<std::unique_ptr<GpuDevice>> owners;
  std::vector<Device> devices;
  for (const GpuInfo& g : gpus) {
    owners.push_back(std::make_unique<GpuDevice>(g.index, Precision::FP32));
    devices.push_back(owners.back()->device);
  }
  INFO(gpus.size() << " GPU(s)");
  auto comm = make_nccl_communicator(devices, 60.0);
  REQUIRE(comm->size() == int(devices.size()));
  check_collectives(exercise(*comm, devices), comm->size());
}
#endif

TEST_CASE("a world of one process on GPU 0 (NCCL over the world, its id through the process group) trains as a "
          "plain run", "[gpu][gpu_training][mpi]") {
  TRAINER_REQUIRE_GPU();
  LoneProcessGroup lone;
  const TrainRun plain = train_run("0", Precision::FP32), world = train_run("0", Precision::FP32, kTinyConfig, &lone);
  CHECK(world.losses == plain.losses);
  CHECK(world.weights == plain.weights);
}

#if defined(TRAINER_WITH_CUDA)
/// This process as rank 0 of two whose other process never comes: MPI's part succeeds, NCCL's rendezvous waits,
/// and the other process does not answer (as MpiProcessGroup::unanswered says it).
class HalfWorld : public LoneProcessGroup {
 public:
  int size() const override { return 2; }
  std::string unanswered() override { return "rank 1 (host b) did not answer"; }
};

TEST_CASE("NCCL over a world of two processes whose peer never joins times out at creation, naming the cause",
          "[gpu][gpu_training][mpi]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice gpu(0, Precision::FP32);
  HalfWorld half;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(make_nccl_communicator({gpu.device}, 3.0, NcclWorld{&half, 0, 2}),
                    Catch::Contains("NCCL initialisation for cuda:0 failed: timed out after 3 s: rank 1 (host b) "
                                    "did not answer"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
}
#endif

TEST_CASE("training on GPU 0 and on two towers of GPU 0 follows the CPU (fp32)", "[gpu][gpu_training]") {
  TRAINER_REQUIRE_GPU();
  const TrainRun cpu = train_run("cpu", Precision::FP32);
  {
    const Config config = parse_config(kTinyConfig, "tiny.yaml");
    const DevicePlan devices = plan("cpu");
    Trainer fresh(config, devices, 1);
    REQUIRE(max_rel_diff(all_weights(fresh), cpu.weights) > 1e-3);  // training moved the weights
  }
  for (const char* spec : {"0", "0,0"}) {
    INFO("--gpus " << spec);
    const TrainRun gpu = train_run(spec, Precision::FP32);
    check_losses(gpu.losses, cpu.losses, kLossTolFp32);
    const double w = max_rel_diff(gpu.weights, cpu.weights);
    INFO("weights: max |gpu - cpu| / max(1, |cpu|) = " << w);
    CHECK(w <= kWeightTolFp32);
  }
}

TEST_CASE("training on GPU 0 in tf32 and bf16 stays near the CPU's losses", "[gpu][gpu_training]") {
  TRAINER_REQUIRE_GPU();
  const TrainRun cpu = train_run("cpu", Precision::FP32);
  const std::pair<Precision, double> cases[] = {{Precision::TF32, kLossTolTf32}, {Precision::BF16, kLossTolBf16}};
  for (const auto& [p, tol] : cases) {
    INFO("precision " << precision_name(p));
    check_losses(train_run("0", p).losses, cpu.losses, tol);
  }
}

TEST_CASE("evaluate on GPU towers matches the CPU", "[gpu][gpu_training]") {
  TRAINER_REQUIRE_GPU();
  Config config = parse_config(kTinyConfig, "tiny.yaml");
  config.training.precision = Precision::FP32;  // the tolerances are fp32's (the default is tf32)
  const Dataset data = tiny_data();
  std::vector<int> all(size_t(data.size()));
  for (int i = 0; i < data.size(); ++i) all[size_t(i)] = i;
  // Weights after a few CPU steps (logits spread away from the thresholds),
  // loaded into every trainer.
  const DevicePlan cpu_plan = plan("cpu");
  Trainer cpu(config, cpu_plan, 1);
  for (const std::vector<int>& b : kBatches) cpu.train_step(data, b);
  const BatchStats ref = cpu.evaluate(data, all, 4);
  REQUIRE(ref.samples == data.size());
  for (const char* spec : {"0", "0,0"}) {
    INFO("--gpus " << spec);
    const DevicePlan gpu_plan = plan(spec);
    Trainer gpu(config, gpu_plan, 1);
    gpu.load_weights(cpu.weights(), "the CPU trainer");
    const BatchStats got = gpu.evaluate(data, all, 4);
    CHECK(got.samples == ref.samples);
    CHECK(std::abs(got.loss() - ref.loss()) <= kEvalLossTol * std::abs(ref.loss()));
    for (size_t i = 0; i < ref.counts.v.size(); ++i) {
      INFO("metric count " << i << ": GPU " << got.counts.v[i] << ", CPU " << ref.counts.v[i]);
      CHECK(std::abs(got.counts.v[i] - ref.counts.v[i]) <= kEvalCountTol);
    }
  }
}

TEST_CASE("a batch that does not fit in GPU memory is a user error saying what to lower", "[gpu][gpu_training]") {
  TRAINER_REQUIRE_GPU();
  // 40 images whose first layer's output is 512 x 512 x 4096 floats (4 GiB) each: 160 GiB in all.
  const Config config = parse_config(R"(
model:
  layers:
    - {type: Input, shape: [512, 512, 1]}
    - {type: Conv2D, filters: 4096, kernel_size: 1, activation: relu}
    - {type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data: {images: unused, masks: unused}
training: {batch_size: 40}
)",
                                     "huge.yaml");
  Dataset data;
  data.images.resize(Shape{40, 512, 512, 1});
  data.masks.resize(Shape{40, 512, 512, 1});
  data.images.zero();
  data.masks.zero();
  std::vector<int> batch(40);
  for (int i = 0; i < 40; ++i) batch[size_t(i)] = i;
  Trainer t(config, plan("0"), 1);
  try {
    t.train_step(data, batch);
    FAIL("the step should not fit");
  } catch (const DeviceOutOfMemory& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("cuda:0 out of memory allocating") != std::string::npos);
    CHECK(msg.find("40 image(s) of [512, 512, 1]") != std::string::npos);
    CHECK(msg.find("lower training.batch_size") != std::string::npos);
    CHECK(msg.find("The memory plan for 40 sample(s) a tower in tf32 is ") != std::string::npos);
    CHECK(msg.find("--batch-size 40 --precision tf32 lists its parts") != std::string::npos);
    CHECK(e.requested_bytes >= size_t(40) * 512 * 512 * 4096 * 4);
  }
}

TEST_CASE("bf16 activations through pooling, concatenation and a skip gradient stay near the CPU's losses",
          "[gpu][gpu_training]") {
  TRAINER_REQUIRE_GPU();
  {  // the GPU tower really stores bf16 where the test means it to
    Config config = parse_config(kTinyUnetConfig, "tiny.yaml");
    config.training.precision = Precision::BF16;
    Trainer t(config, plan("0"), 1);
    const Model& m = t.model();
    for (int i = 0; i < m.num_layers(); ++i) {
      const std::string& name = m.layer(i).name();
      INFO("layer " << name);
      // c3 feeds the one-filter output layer, which runs in tf32 on fp32.
      const bool f32 = name == "in" || name == "scale" || name == "c3" || name == "out";
      CHECK(m.activation_type(i) == (f32 ? DType::F32 : DType::BF16));
    }
  }
  check_gpu_follows_cpu(kTinyUnetConfig, Precision::BF16, kLossTolBf16, kWeightChangeTolBf16);
}

TEST_CASE("a squeeze-and-excitation network on GPU 0 and two towers of GPU 0 follows the CPU (fp32)",
          "[gpu][gpu_training]") {
  TRAINER_REQUIRE_GPU();
  const TrainRun cpu = check_gpu_follows_cpu(kTinySeConfig, Precision::FP32, kLossTolFp32, kWeightTolFp32);
  // Dense runs as a 1x1 convolution: in tf32 and bf16 too.
  const std::pair<Precision, double> cases[] = {{Precision::TF32, kLossTolTf32}, {Precision::BF16, kLossTolBf16}};
  for (const auto& [p, tol] : cases) {
    INFO("precision " << precision_name(p));
    check_losses(train_run("0", p, kTinySeConfig).losses, cpu.losses, tol);
  }
}

TEST_CASE("gradient clipping on GPU 0 and two towers of GPU 0 follows the CPU (fp32)", "[gpu][gpu_training]") {
  TRAINER_REQUIRE_GPU();
  const TrainRun unclipped = train_run("cpu", Precision::FP32);
  // Limits far below the tiny model's gradients, so that every step clips.
  for (const char* keys : {", clipnorm: 0.001", ", global_clipnorm: 0.001", ", clipvalue: 0.0001"}) {
    INFO("optimizer" << keys);
    std::string yaml = kTinyConfig;
    const std::string end = "nesterov: true}";
    REQUIRE(yaml.find(end) != std::string::npos);
    yaml.replace(yaml.find(end), end.size(), std::string("nesterov: true") + keys + "}");
    const TrainRun cpu = train_run("cpu", Precision::FP32, yaml);
    REQUIRE(max_rel_diff(cpu.weights, unclipped.weights) > 1e-4);  // clipping changed the training
    for (const char* spec : {"0", "0,0"}) {
      INFO("--gpus " << spec);
      const TrainRun gpu = train_run(spec, Precision::FP32, yaml);
      check_losses(gpu.losses, cpu.losses, kLossTolFp32);
      CHECK(max_rel_diff(gpu.weights, cpu.weights) <= kWeightTolFp32);
    }
  }
}

TEST_CASE("gelu, swish and mish layers on GPU 0 and two towers of GPU 0 follow the CPU, and in bf16 write fp32",
          "[gpu][gpu_training]") {
  TRAINER_REQUIRE_GPU();
  // The tiny U-Net with its activations replaced: a convolution, a separable
  // convolution and a transposed convolution keeping their pre-activations,
  // and an Activation layer reading its input.
  std::string yaml = kTinyUnetConfig;
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"name: c1b, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}",
            "name: c1b, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: gelu}"},
           {"name: c2, type: Conv2D, filters: 16, kernel_size: 3, padding: same, activation: relu}",
            "name: c2, type: SeparableConv2D, filters: 16, kernel_size: 3, padding: same, activation: swish}"},
           {"name: u1, type: Conv2DTranspose, filters: 8, kernel_size: 2, strides: 2, padding: same}",
            "name: u1, type: Conv2DTranspose, filters: 8, kernel_size: 2, strides: 2, padding: same, "
            "activation: mish}\n    - {name: u1h, type: Activation, activation: hard_silu}"},
           {"inputs: [u1, c1b]", "inputs: [u1h, c1b]"},
       }) {
    REQUIRE(yaml.find(from) != std::string::npos);
    yaml.replace(yaml.find(from), from.size(), to);
  }
  const TrainRun cpu = check_gpu_follows_cpu(yaml, Precision::FP32, kLossTolFp32, kWeightTolFp32);
  Config bf16 = parse_config(yaml, "tiny.yaml");
  bf16.training.precision = Precision::BF16;
  Trainer t(bf16, plan("0"), 1);
  const Model& m = t.model();
  int kept = 0;
  for (int i = 0; i < m.num_layers(); ++i) {
    const std::string& name = m.layer(i).name();
    INFO("layer " << name);
    if (name == "c1") CHECK(m.activation_type(i) == DType::BF16);  // c1b reads bf16 and writes fp32
    if (name != "c1b" && name != "c2" && name != "u1" && name != "u1h") continue;
    CHECK(m.activation_type(i) == DType::F32);
    ++kept;
  }
  CHECK(kept == 4);
  check_losses(train_run("0", Precision::BF16, yaml).losses, cpu.losses, kLossTolBf16);
}

TEST_CASE("GroupNormalization and LayerNormalization networks on GPU 0 and on 0,0 follow the CPU (fp32)",
          "[gpu][gpu_training][group_norm][layer_norm]") {
  TRAINER_REQUIRE_GPU();
  for (const char* norm : {"type: GroupNormalization, groups: 2}", "type: LayerNormalization}"}) {
    INFO(norm);
    std::string yaml = kTinyConfig;
    const std::string bn = "type: BatchNormalization, synchronized: true}";
    REQUIRE(yaml.find(bn) != std::string::npos);
    yaml.replace(yaml.find(bn), bn.size(), norm);
    check_gpu_follows_cpu(yaml, Precision::FP32, kLossTolFp32, kWeightTolFp32);
  }
}

TEST_CASE("frozen layers (trainable: false) on GPU 0 and on 0,0 keep their weights and follow the CPU (fp32, bf16)",
          "[gpu][gpu_training][freeze]") {
  TRAINER_REQUIRE_GPU();
  // Each frozen kind's dx without its weight gradients (a convolution's backward without the filter
  // gradient, a BatchNormalization in inference mode) carries c1's gradient.
  const std::string yaml = tiny_frozen_config(true);
  const TrainRun cpu = check_gpu_follows_cpu(yaml, Precision::FP32, kLossTolFp32, kWeightTolFp32);
  check_losses(train_run("0", Precision::BF16, yaml).losses, cpu.losses, kLossTolBf16);
  const std::vector<WeightRecord> initial = Trainer(parse_config(yaml, "tiny.yaml"), plan("cpu"), 1).weights();
  for (const char* spec : {"0", "0,0"}) {
    const TrainRun gpu = train_run(spec, Precision::FP32, yaml);
    REQUIRE(gpu.records.size() == initial.size());
    for (size_t i = 0; i < initial.size(); ++i) {
      const std::string& layer = initial[i].layer;
      if (layer == "c1" || layer == "out") continue;  // the layers that train
      INFO("--gpus " << spec << ": " << layer << "/" << initial[i].name);
      CHECK(gpu.records[i].values == initial[i].values);
    }
  }
}

TEST_CASE("Keras's Dice and Tversky, pooled over the global batch or per image, follow the CPU in training on GPU 0 "
          "and 0,0 and in evaluate on 0,0,0 (fp32)",
          "[gpu][gpu_training][overlap]") {
  TRAINER_REQUIRE_GPU();
  // On 0,0 the pooled ratio's sums are added over the two towers before either's gradient.
  for (const char* loss : {"Dice", "{type: Tversky, alpha: 0.7, beta: 0.3, axis: [1, 2, 3]}"}) {
    INFO(loss);
    std::string yaml = kTinyConfig;
    const std::string from = "loss: bce_dice";
    REQUIRE(yaml.find(from) != std::string::npos);
    yaml.replace(yaml.find(from), from.size(), std::string("loss: ") + loss);
    check_gpu_follows_cpu(yaml, Precision::FP32, kLossTolFp32, kWeightTolFp32);
    // Evaluation in batches of 4 of the 13 samples on three towers of GPU 0:
    // the last batch of 1 leaves two of them without a sample, which join the sums.
    Config config = parse_config(yaml, "tiny.yaml");
    config.training.precision = Precision::FP32;
    const Dataset data = tiny_data();
    std::vector<int> all(13);
    for (int i = 0; i < 13; ++i) all[size_t(i)] = i;
    Trainer cpu(config, plan("cpu"), 1), gpu(config, plan("0,0,0"), 1);
    const BatchStats want = cpu.evaluate(data, all, 4), got = gpu.evaluate(data, all, 4);
    CHECK(got.samples == 13);
    CHECK(std::abs(got.loss() - want.loss()) <= kLossTolFp32 * std::abs(want.loss()));
  }
}

namespace {

/// tiny_data() held as an 8-bit dataset is (uint8 images rounded, uint8 masks).
Dataset tiny_data_u8() {
  const Dataset f = tiny_data();
  Dataset d;
  d.names = f.names;
  d.images.set_dtype(DType::U8);
  d.images.resize(f.images.shape());
  d.masks.set_dtype(DType::U8);
  d.masks.resize(f.masks.shape());
  for (size_t i = 0; i < f.images.numel(); ++i)
    static_cast<uint8_t*>(d.images.raw())[i] = uint8_t(std::lround(f.images.data()[i]));
  for (size_t i = 0; i < f.masks.numel(); ++i) static_cast<uint8_t*>(d.masks.raw())[i] = uint8_t(f.masks.data()[i]);
  return d;
}

}  // namespace

TEST_CASE("GPU towers augment 8-bit samples on the device and follow the CPU's augmented training (fp32)",
          "[gpu][gpu_training]") {
  TRAINER_REQUIRE_GPU();
  Config config = parse_config(kTinyConfig, "tiny.yaml");
  config.training.precision = Precision::FP32;
  AugmentationConfig& a = config.data.augmentation;
  a.horizontal_flip = a.rotate_90 = true;
  a.rotation_range = 20, a.width_shift_range = 0.1, a.zoom_low = 0.9, a.zoom_high = 1.1;
  a.brightness_low = 0.8, a.brightness_high = 1.2;
  a.fill_mode = FillMode::Reflect;
  const Dataset data = tiny_data_u8();
  const auto losses = [&](const char* spec) {
    Trainer t(config, plan(spec), 1);
    std::vector<double> l;
    for (const std::vector<int>& b : kBatches) l.push_back(t.train_step(data, b).loss());
    return l;
  };
  const std::vector<double> cpu = losses("cpu");
  for (const char* spec : {"0", "0,0"}) {
    INFO("--gpus " << spec);
    // The device's augmentation differs from OpenCV's in the few percent of
    // pixels whose source point OpenCV's rounding moves to the next 1/32 pixel,
    // by up to a neighbour difference over 32 (tests/test_augment_batch.cpp).
    check_losses(losses(spec), cpu, 2 * kLossTolFp32);
  }
}
