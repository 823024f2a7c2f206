// Training throughput of a config's network on random data, in images/s, as
// one JSON line (the same measurement as ../shared/bench/torch_unet.py: SGD
// nesterov, binary cross-entropy, warm-up steps, then timed steps; on GPUs the
// timing ends once the last step's queued work is done).
//   unet_throughput --config configs/unet_small.yaml --batch 8 --gpus cpu
// --gpus defaults to all (every GPU, else one CPU tower), as trainer's.
//   unet_throughput --config configs/unet.yaml --batch 32 --gpus 0 --precision bf16
// --gpus takes what trainer's --gpus takes; --precision sets the
// convolutions' arithmetic (training.precision; the JSON line names what the
// towers compute in: a CPU without AVX512-BF16 or AMX, and tf32 on a CPU, give fp32).
// --profile N: after the timed steps (the JSON line is printed first), N more
// steps with Trainer::set_profiling on, and tower 0's per-phase and per-layer
// times to stderr (profiling synchronizes the device after every layer, so
// those steps are slower; they do not change the JSON line).
//   unet_throughput --config configs/unet.yaml --batch 32 --gpus 0 --profile 5
// --nccl-alone: one GPU tower (--gpus 0) that reduces through NCCL over a
// world of one process, as under `mpirun -np 1`, so that its gradient buckets
// take the NCCL path (communication stream, events, overlap with backward);
// bench/scaling.sh runs it under the tests' NCCL stand-in, whose modeled ring
// delays then stand for the other GPUs of an N-GPU machine.
// --hold-buckets: every step starts its gradient buckets' all-reduces after
// backward instead of during it (Trainer::set_bucket_overlap(false)), for
// bench/scaling.sh's comparison of the two.
// The random data is held as a dataset of 8-bit files is (uint8 images and
// masks, data/held_samples.h), so a GPU tower uploads it as it is and
// converts it on the device. --augment turns on data.augmentation (flips,
// quarter turns, a 20-degree rotation, 10% shifts and zoom, brightness
// 0.8-1.2): on a GPU tower it runs on the device, on a CPU tower in OpenCV;
// the JSON line's input_wait_ms_per_step then says how long tower 0 waited
// for it (with --threads 1 per tower: one host core feeding each).
// --cuda-graphs: training.cuda_graphs (one GPU tower records its forward and
// backward once and replays them); the JSON line's replayed_steps counts the
// timed steps replayed (0 where the run could not record: a warning says why).
// --trace N (CUDA builds with CUPTI): then N more steps recorded with CUPTI
// (kernel_trace.h), unsynchronized like the timed ones: per step the GPU's
// busy and idle time, convolution and other kernel time and the top kernels,
// to stderr.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "backend/gpu_info.h"
#include "config/config.h"
#include "core/error.h"
#include "dist/device_plan.h"
#include "dist/process_group.h"
#include "train/trainer.h"
#if defined(TRAINER_WITH_CUPTI)
#include "kernel_trace.h"
#endif

using namespace trainer;

namespace {
/// A microscopy run's augmentation: flips, quarter turns, a small affine transform and brightness.
void set_benchmark_augmentation(AugmentationConfig& a) {
  a.horizontal_flip = a.vertical_flip = a.rotate_90 = true;
  a.rotation_range = 20;
  a.width_shift_range = a.height_shift_range = 0.1;
  a.zoom_low = 0.9, a.zoom_high = 1.1;
  a.brightness_low = 0.8, a.brightness_high = 1.2;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Training images/s of a config's model on random data"};
  std::string config_path, gpus = "all", precision_text = "tf32";
  int batch = 8, steps = 10, warmup = 2, profile = 0, trace = 0, threads = int(std::max(1u, std::thread::hardware_concurrency()));
  bool nccl_alone = false, hold_buckets = false, augment = false, cuda_graphs = false;
  app.add_option("--config", config_path, "Run configuration (its model and input size are measured)")->required();
  app.add_option("--gpus", gpus, "Devices, as trainer's --gpus (all, 0,1, cpu, cpu:N)")->capture_default_str();
  app.add_option("--batch", batch, "Global batch per step")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--steps", steps, "Timed steps")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps first")->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app.add_option("--threads", threads, "CPU threads in all")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--profile", profile, "Profiled steps after the timed ones (per-layer times to stderr)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--trace", trace, "Steps traced with CUPTI after the others (GPU kernel times to stderr)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_flag("--nccl-alone", nccl_alone, "One GPU tower reducing through NCCL over a world of one process");
  app.add_flag("--hold-buckets", hold_buckets, "Start the gradient all-reduces after backward, not during it");
  app.add_flag("--cuda-graphs", cuda_graphs, "Record one step's forward and backward as CUDA graphs and replay them");
  app.add_flag("--augment", augment, "Flips, quarter turns, an affine transform and brightness on every sample");
  app.add_option("--precision", precision_text, "Convolution arithmetic: fp32, tf32 or bf16")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad flag: 2, as trainer
  }
  const Precision precision = precision_text == "bf16"   ? Precision::BF16
                              : precision_text == "tf32" ? Precision::TF32
                                                         : Precision::FP32;
  try {
    Config config = load_config(config_path);
    config.training.loss.kind = LossKind::BinaryCrossentropy;
    config.training.optimizer = OptimizerConfig{};
    config.training.optimizer.type = OptimizerKind::SGD;  // as the peers (OptimizerConfig's default is RMSprop)
    config.training.optimizer.learning_rate = 0.03;
    config.training.optimizer.momentum = 0.9;
    config.training.optimizer.nesterov = true;
    config.training.precision = precision;
    if (augment) set_benchmark_augmentation(config.data.augmentation);
    config.training.cuda_graphs = cuda_graphs;
    const DevicePlan plan = plan_devices(gpus, list_gpus(), true);
    for (const std::string& w : plan.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    if (nccl_alone && (plan.gpus.size() != 1 || plan.cpu_towers))
      throw UserError("--nccl-alone needs one GPU tower (--gpus 0), not " + plan.describe());
    LoneProcessGroup lone;
    Trainer trainer(config, plan, std::max(1, threads / plan.towers()), nccl_alone ? &lone : nullptr);
    trainer.set_bucket_overlap(!hold_buckets);
    const Shape in = trainer.model().input_shape();
    Dataset data;
    data.images.set_dtype(DType::U8);
    data.images.resize(in.with_batch(batch));
    data.masks.set_dtype(DType::U8);
    data.masks.resize(Shape{batch, in.h, in.w, 1});
    std::mt19937 rng(0);
    std::uniform_int_distribution<int> u(0, 255);
    auto* pixels = static_cast<uint8_t*>(data.images.raw());
    auto* labels = static_cast<uint8_t*>(data.masks.raw());
    for (size_t i = 0; i < data.images.numel(); ++i) pixels[i] = uint8_t(u(rng));
    for (size_t i = 0; i < data.masks.numel(); ++i) labels[i] = u(rng) > 204 ? 1 : 0;
    std::vector<int> idx(static_cast<size_t>(batch));
    for (int i = 0; i < batch; ++i) idx[size_t(i)] = i;
    data.names.resize(size_t(batch));
    for (int i = 0; i < warmup; ++i) trainer.train_step(data, idx);
    trainer.take_input_wait_seconds();  // count the timed steps only
    const int64_t replayed_before = trainer.replayed_steps();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) trainer.train_step(data, idx);
    // On a GPU, train_step may return with the last update still queued
    // (torch_unet.py likewise ends its timing with torch.cuda.synchronize()).
    trainer.synchronize();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Tower 0's input wait over the timed steps (ms per step) and its peak device memory (MiB; 0 on the CPU).
    const double wait_ms = 1e3 * trainer.take_input_wait_seconds()[0] / steps;
    const double peak_mib = double(trainer.peak_memory_bytes()[0]) / double(1 << 20);
    std::printf("{\"config\": \"%s\", \"devices\": \"%s\", \"precision\": \"%s\", \"size\": %d, "
                "\"batch\": %d, \"steps\": %d, \"threads\": %d, \"images_per_s\": %.3f, \"params\": %zu, "
                "\"input_wait_ms_per_step\": %.3f, \"peak_memory_mib\": %.0f, \"reduction\": \"%s\", \"augment\": %s, "
                "\"replayed_steps\": %lld}\n",
                config_path.c_str(), plan.describe().c_str(), precision_name(trainer.devices().device(0).precision),
                in.h, batch, steps, threads, batch * steps / dt,
                trainer.model().num_params() + trainer.model().num_state(), wait_ms, peak_mib,
                trainer.devices().reduction().c_str(), augment ? "true" : "false",
                static_cast<long long>(trainer.replayed_steps() - replayed_before));
    if (profile > 0) {
      std::fflush(stdout);
      trainer.set_profiling(true);
      for (int i = 0; i < profile; ++i) trainer.train_step(data, idx);
      std::fprintf(stderr, "%s", trainer.profile_report().c_str());
      trainer.set_profiling(false);
    }
    if (trace > 0) {
#if defined(TRAINER_WITH_CUPTI)
      if (plan.gpus.empty()) throw UserError("--trace records GPU kernels; --gpus names no GPU");
      std::fflush(stdout);
      trainer.synchronize();  // nothing of the earlier steps left running
      bench::KernelTrace recording;
      for (int i = 0; i < trace; ++i) trainer.train_step(data, idx);
      std::fprintf(stderr, "%s", recording.report(trace, 25).c_str());
#else
      throw UserError("--trace needs a CUDA build with CUPTI (the CUDA toolkit's extras/CUPTI)");
#endif
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
