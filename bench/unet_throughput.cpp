// Training throughput of a config's network on random data, in images/s, as
// one JSON line (the same measurement as ../shared/bench/torch_unet.py: SGD
// nesterov, binary cross-entropy, warm-up steps, then timed steps; on GPUs the
// timing ends once the last step's queued work is done).
//   unet_throughput --config configs/unet_small.yaml --batch 8 --gpus cpu
//   unet_throughput --config configs/unet.yaml --batch 32 --gpus 0 --precision bf16
// --gpus takes what trainer's --gpus takes; --precision sets the GPU
// convolutions' arithmetic (training.precision; the CPU always runs fp32).
// --profile N: after the timed steps (the JSON line is printed first), N more
// steps with Trainer::set_profiling on, and tower 0's per-phase and per-layer
// times to stderr (profiling synchronizes the device after every layer, so
// those steps are slower; they do not change the JSON line).
//   unet_throughput --config configs/unet.yaml --batch 32 --gpus 0 --profile 5
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include "backend/gpu_info.h"
#include "config/config.h"
#include "core/error.h"
#include "dist/device_plan.h"
#include "train/trainer.h"

using namespace trainer;

int main(int argc, char** argv) {
  CLI::App app{"Training images/s of a config's model on random data"};
  std::string config_path, gpus = "cpu";
  int batch = 8, steps = 10, warmup = 2, profile = 0, threads = int(std::thread::hardware_concurrency());
  app.add_option("--config", config_path)->required();
  app.add_option("--gpus", gpus);
  app.add_option("--batch", batch);
  app.add_option("--steps", steps);
  app.add_option("--warmup", warmup);
  app.add_option("--threads", threads);
  app.add_option("--profile", profile, "Profiled steps after the timed ones (per-layer times to stderr)");
  Precision precision = Precision::FP32;
  const std::map<std::string, Precision> precisions = {
      {"fp32", Precision::FP32}, {"tf32", Precision::TF32}, {"bf16", Precision::BF16}};
  app.add_option("--precision", precision, "GPU convolution arithmetic: fp32, tf32 or bf16")
      ->transform(CLI::CheckedTransformer(precisions));
  CLI11_PARSE(app, argc, argv);
  try {
    Config config = load_config(config_path);
    config.training.loss = "binary_crossentropy";
    config.training.optimizer = OptimizerConfig{};
    config.training.optimizer.learning_rate = 0.03;
    config.training.optimizer.momentum = 0.9;
    config.training.optimizer.nesterov = true;
    config.training.precision = precision;
    const DevicePlan plan = plan_devices(gpus, list_gpus(), true);
    for (const std::string& w : plan.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    Trainer trainer(config, plan, std::max(1, threads / plan.towers()));
    const Shape in = trainer.model().input_shape();
    Dataset data;
    data.images.resize(in.with_batch(batch));
    data.masks.resize(Shape{batch, in.h, in.w, 1});
    std::mt19937 rng(0);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (size_t i = 0; i < data.images.numel(); ++i) data.images.data()[i] = 255.f * u(rng);
    for (size_t i = 0; i < data.masks.numel(); ++i) data.masks.data()[i] = u(rng) > 0.8f ? 1.f : 0.f;
    std::vector<int> idx(static_cast<size_t>(batch));
    for (int i = 0; i < batch; ++i) idx[size_t(i)] = i;
    data.names.resize(size_t(batch));
    for (int i = 0; i < warmup; ++i) trainer.train_step(data, idx);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) trainer.train_step(data, idx);
    // On a GPU, train_step may return with the last update still queued:
    // reading the weights back waits for it (a copy of params*4 bytes, timed too).
    if (!plan.gpus.empty()) trainer.weights();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"trainer\": \"%s\", \"devices\": \"%s\", \"precision\": \"%s\", \"size\": %d, "
                "\"batch\": %d, \"steps\": %d, \"threads\": %d, \"images_per_s\": %.3f, \"params\": %zu}\n",
                config_path.c_str(), plan.describe().c_str(), plan.gpus.empty() ? "fp32" : precision_name(precision),
                in.h, batch, steps, threads, batch * steps / dt,
                trainer.model().num_params() + trainer.model().num_state());
    if (profile > 0) {
      std::fflush(stdout);
      trainer.set_profiling(true);
      for (int i = 0; i < profile; ++i) trainer.train_step(data, idx);
      std::fprintf(stderr, "%s", trainer.profile_report().c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
