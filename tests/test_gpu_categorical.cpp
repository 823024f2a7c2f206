// GPU parity of the categorical (softmax) path, the CPU as the oracle: the
// loss sum and gradient, the confusion counts (exact, in both the
// shared-memory and the global table), the channel softmax, all with some
// pixels ignored, and a K-class network training on GPU 0 and on two towers
// sharing it, with and without ignore_class. Skipped without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "backend/elementwise_ops.h"
#include "backend/train_ops.h"
#include "config/config.h"
#include "dist/device_plan.h"
#include "backend/gpu_info.h"
#include "gpu_testing.h"
#include "tiny_model.h"
#include "train/trainer.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// Relative tolerance of per-pixel exp/log results (CUDA's and glibc's expf and logf differ by an ulp or two).
constexpr double kTranscendental = 1e-5;
/// A double sum of the same float terms in another order, relative to its size.
constexpr double kReorder = 1e-9;

/// n class indices 0..k-1 as floats from seed.
std::vector<float> random_classes(size_t n, int k, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> y(n);
  for (float& v : y) v = float(rng() % unsigned(k));
  return y;
}

}  // namespace

TEST_CASE("GPU softmax loss, gradient, confusion counts and channel softmax match the CPU",
          "[gpu][gpu_ops][categorical]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  // 3 classes (shared-memory counts), 64 (the largest shared table) and 70 (the global table).
  for (const int k : {3, 64, 70}) {
    INFO(k << " classes");
    const size_t n = 3 * 97 * 101;  // pixels: not a multiple of the block or of a range
    std::vector<float> z = random_values(n * size_t(k), 501u + unsigned(k), -8.f, 8.f);
    for (size_t p = 0; p < n; p += 5) z[p * size_t(k) + 1] = z[p * size_t(k)] = 30.f;  // ties: class 0 wins
    std::vector<float> y = random_classes(n, k, 511u + unsigned(k));
    size_t ignored = 0;  // an ignore_class's pixels: no loss, no gradient, no count
    for (size_t p = 3; p < n; p += 7, ++ignored) y[p] = kIgnoredPixel;
    auto sum = [&](const Device& d) {
      Buffer<float> zb = upload(z, d), yb = upload(y, d);
      std::vector<double> s(1);
      softmax_loss_sum(d, zb.data(), yb.data(), n, k, CrossEntropyForm{}, s.data());
      return s;
    };
    CHECK_CLOSE("softmax_loss_sum", sum(g.device), sum(Device{}), kReorder + kTranscendental);
    auto grad = [&](const Device& d) {
      Buffer<float> zb = upload(z, d), yb = upload(y, d), gb(d, z.size());
      softmax_loss_grad(d, zb.data(), yb.data(), n, k, CrossEntropyForm{}, 1.f / 97, gb.data());
      return download(gb);
    };
    CHECK_CLOSE("softmax_loss_grad", grad(g.device), grad(Device{}), kTranscendental);
    // Dice's and Tversky's per-pixel term over softmax channels: the true class's probability.
    CrossEntropyForm probability;
    probability.true_class_probability = true;
    auto probability_sum = [&](const Device& d) {
      Buffer<float> zb = upload(z, d), yb = upload(y, d);
      std::vector<double> s(1);
      softmax_loss_sum(d, zb.data(), yb.data(), n, k, probability, s.data());
      return s;
    };
    CHECK_CLOSE("softmax_loss_sum (true-class probability)", probability_sum(g.device), probability_sum(Device{}),
                kReorder + kTranscendental);
    auto probability_grad = [&](const Device& d) {
      Buffer<float> zb = upload(z, d), yb = upload(y, d), gb(d, z.size());
      softmax_loss_grad(d, zb.data(), yb.data(), n, k, probability, -0.37f, gb.data());
      return download(gb);
    };
    CHECK_CLOSE("softmax_loss_grad (true-class probability)", probability_grad(g.device), probability_grad(Device{}),
                kTranscendental);
    auto confusion = [&](const Device& d) {
      Buffer<float> zb = upload(z, d), yb = upload(y, d);
      std::vector<int64_t> c(size_t(k) * size_t(k), 1);  // added to, not overwritten
      class_confusion(d, zb.data(), yb.data(), n, k, c.data());
      return c;
    };
    const std::vector<int64_t> ref = confusion(Device{});
    int64_t counted = 0;
    for (int64_t c : ref) counted += c - 1;
    REQUIRE(counted == int64_t(n - ignored));
    CHECK_IDENTICAL("class_confusion", confusion(g.device), ref);
    auto softmax = [&](const Device& d) {
      Buffer<float> xb = upload(z, d);
      softmax_channels(d, xb.data(), n, k);
      return download(xb);
    };
    CHECK_CLOSE("softmax_channels", softmax(g.device), softmax(Device{}), kTranscendental);
  }
}

TEST_CASE("GPU softmax loss sum over more pixels than its ranges (each range then longer) matches the CPU",
          "[gpu][gpu_ops][categorical]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const int k = 3;
  const size_t n = 2048 * 2048 + 12345;  // past 2048 ranges of 2048 pixels
  const std::vector<float> z = random_values(n * size_t(k), 521, -8.f, 8.f);
  const std::vector<float> y = random_classes(n, k, 522);
  auto sum = [&](const Device& d) {
    Buffer<float> zb = upload(z, d), yb = upload(y, d);
    std::vector<double> s(1);
    softmax_loss_sum(d, zb.data(), yb.data(), n, k, CrossEntropyForm{}, s.data());
    return s;
  };
  CHECK_CLOSE("softmax_loss_sum", sum(g.device), sum(Device{}), kReorder + kTranscendental);
}

TEST_CASE("a softmax network trains on GPU 0 and on two towers of GPU 0 as on the CPU (fp32), Dice too",
          "[gpu][gpu_training][categorical]") {
  TRAINER_REQUIRE_GPU();
  // With ignore_class: the masked mean over the global batch; Dice: Keras's over the one-hot masks, pooled.
  const int variant = GENERATE(0, 1, 2);
  const bool ignore = variant == 1;
  const char* const loss_names[] = {"sparse_categorical_crossentropy",
                                    "{type: SparseCategoricalCrossentropy, ignore_class: 255}", "Dice"};
  INFO("loss " << loss_names[variant]);
  Config config = parse_config(tiny_classes_config(3, loss_names[variant]), "classes.yaml");
  config.training.precision = Precision::FP32;  // IEEE on both sides: the tolerances below are fp32's
  const Dataset data = ignore ? tiny_ignored_class_data() : tiny_class_data();
  double counted_pixels = 0;
  for (size_t i = 0; i < data.masks.numel(); ++i) counted_pixels += data.masks.data()[i] != kIgnoredPixel;
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}, {3, 9}};
  auto run = [&](const std::string& spec, std::vector<double>& losses) {
    Trainer t(config, plan_devices(spec, list_gpus(), true), 1);
    for (const auto& b : batches) losses.push_back(t.train_step(data, b).loss());
    const BatchStats e = t.evaluate(data, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 4);
    return std::vector<double>(e.counts.v.begin(), e.counts.v.end());
  };
  std::vector<double> cpu_losses;
  const std::vector<double> cpu_counts = run("cpu", cpu_losses);
  for (const char* spec : {"0", "0,0"}) {
    INFO("--gpus " << spec);
    std::vector<double> losses;
    const std::vector<double> counts = run(spec, losses);
    REQUIRE(losses.size() == cpu_losses.size());
    for (size_t i = 0; i < losses.size(); ++i) {
      INFO("step " << i + 1 << ": loss " << losses[i] << ", CPU " << cpu_losses[i]);
      CHECK(std::abs(losses[i] - cpu_losses[i]) <= 1e-4 * cpu_losses[i]);
    }
    // The argmax can flip where two logits are within rounding; nearly all pixels agree.
    double moved = 0, total = 0;
    for (size_t i = MetricCounts::kSize; i < counts.size(); ++i) {
      moved += std::abs(counts[i] - cpu_counts[i]);
      total += cpu_counts[i];
    }
    CHECK(total == counted_pixels);
    CHECK(moved <= 1e-3 * total);
  }
}
