// Deferred read-backs on a GPU (DeviceContext::defer_read_backs): the loss's
// sums and the metric counts queued while deferring reach the host arrays
// they were given in finish_read_backs, not before, with the values of
// read-backs done at once; read-backs that outgrow the pinned buffer while
// others are pending land intact; an op that reads at once in between
// (abs_and_square_sums) leaves the pending ones alone; a deferral dropped by an error writes nothing; the
// Dice gradient formed on the device from its sums matches the CPU's, the
// sums read late. Skipped without a GPU.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "backend/train_ops.h"
#include "gpu_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// n class indices 0..k-1 as floats, drawn from random values.
std::vector<float> classes_of(const std::vector<float>& u, int k) {
  std::vector<float> y(u.size());
  for (size_t i = 0; i < u.size(); ++i) y[i] = float(int(u[i] * float(k)) % k);
  return y;
}

/// Binary inputs: logits z and 0/1 targets y of n samples of m values, with the metric thresholds.
struct BinaryBatch {
  int n = 3;
  size_t m = 5000;
  std::vector<float> z = random_values(size_t(n) * m, 71u, -4.f, 4.f);
  std::vector<float> y = classes_of(random_values(size_t(n) * m, 72u, 0.f, 1.f), 2);
  std::vector<float> thr = std::vector<float>(kLogitThresholds, 0.f);
  BinaryBatch() {
    for (int t = 0; t < kLogitThresholds; ++t) thr[size_t(t)] = -1.f + 0.25f * float(t);
  }
};

/// A BinaryBatch uploaded to GPU 0 (fp32): declare it first in a test, after TRAINER_REQUIRE_GPU.
struct GpuBatch : BinaryBatch {
  GpuDevice g{0, Precision::FP32};
  const Device& d = g.device;
  Buffer<float> z_dev = upload(z, d), y_dev = upload(y, d);
};

}  // namespace

TEST_CASE("Deferred GPU read-backs reach the host at finish_read_backs, equal to read-backs done at once",
          "[gpu][gpu_ops][read_backs]") {
  TRAINER_REQUIRE_GPU();
  GpuBatch b;
  const Device& d = b.d;
  const float *z = b.z_dev.data(), *y = b.y_dev.data();
  const size_t numel = b.z.size();
  // At once.
  std::vector<double> sums_now(size_t(b.n) * 4);
  std::vector<int64_t> hist_now(2 * size_t(kLogitThresholds + 1), 0);
  segmentation_sums(d, z, y, b.n, b.m, true, true, sums_now.data());
  logit_histogram(d, z, y, numel, b.thr.data(), hist_now.data());
  // Deferred: nothing reaches the arrays until finish.
  constexpr double kUnset = -12345.0;
  std::vector<double> sums(sums_now.size(), kUnset);
  std::vector<int64_t> hist(hist_now.size(), 7);  // added to: 7 more than at once
  DeferredReadBacks late(d);
  segmentation_sums(d, z, y, b.n, b.m, true, true, sums.data());
  logit_histogram(d, z, y, numel, b.thr.data(), hist.data());
  CHECK(sums == std::vector<double>(sums_now.size(), kUnset));
  CHECK(hist == std::vector<int64_t>(hist_now.size(), 7));
  // An op that reads at once (its own wait) gets its value and leaves the pending ones alone.
  const float* ws[] = {z};
  const size_t ns[] = {numel};
  double between[2] = {}, between_now[2] = {};
  abs_and_square_sums(d, ws, ns, 1, between);
  CHECK(sums == std::vector<double>(sums_now.size(), kUnset));
  finish_read_backs(d);
  CHECK(sums == sums_now);
  for (size_t i = 0; i < hist.size(); ++i) CHECK(hist[i] == hist_now[i] + 7);
  // Still deferring after finish_read_backs: the next one waits for the next finish.
  std::vector<int64_t> again(hist_now.size(), 0);
  logit_histogram(d, z, y, numel, b.thr.data(), again.data());
  CHECK(again == std::vector<int64_t>(hist_now.size(), 0));
  late.finish();
  CHECK(again == hist_now);
  // Not deferring any more: at once.
  std::vector<int64_t> now(hist_now.size(), 0);
  logit_histogram(d, z, y, numel, b.thr.data(), now.data());
  CHECK(now == hist_now);
  abs_and_square_sums(d, ws, ns, 1, between_now);
  CHECK(between[0] == between_now[0]);
  CHECK(between[1] == between_now[1]);
}

TEST_CASE("Deferred GPU read-backs that outgrow the pinned buffer while others are pending land intact",
          "[gpu][gpu_ops][read_backs]") {
  TRAINER_REQUIRE_GPU();
  GpuBatch b;
  const Device& d = b.d;
  const int k = 100;  // a 100 x 100 table of 8-byte counts: 80,000 bytes
  const size_t pixels = 20000;
  std::vector<float> z = random_values(pixels * size_t(k), 81u, -3.f, 3.f);
  std::vector<float> y = classes_of(random_values(pixels, 82u, 0.f, 1.f), k);
  Buffer<float> zb = upload(z, d), yb = upload(y, d);
  // The context's first read-backs: a 64 KiB buffer for the sums, then two larger ones for the tables.
  DeferredReadBacks late(d);
  std::vector<double> sums(size_t(b.n) * 4, 0.0);
  std::vector<int64_t> first(size_t(k) * size_t(k), 0), second(first.size(), 0);
  segmentation_sums(d, b.z_dev.data(), b.y_dev.data(), b.n, b.m, true, false, sums.data());  // 96 bytes
  class_confusion(d, zb.data(), yb.data(), pixels, k, first.data());   // outgrows 64 KiB: a 128 KiB buffer
  class_confusion(d, zb.data(), yb.data(), pixels, k, second.data());  // outgrows that: 256 KiB
  late.finish();
  std::vector<double> sums_now(sums.size());
  segmentation_sums(d, b.z_dev.data(), b.y_dev.data(), b.n, b.m, true, false, sums_now.data());
  std::vector<int64_t> now(first.size(), 0);
  class_confusion(d, zb.data(), yb.data(), pixels, k, now.data());
  CHECK(sums == sums_now);
  CHECK(first == now);
  CHECK(second == now);
}

TEST_CASE("A GPU deferral left by an error writes nothing, and read-backs after it are at once",
          "[gpu][gpu_ops][read_backs]") {
  TRAINER_REQUIRE_GPU();
  GpuBatch b;
  const Device& d = b.d;
  const float *z = b.z_dev.data(), *y = b.y_dev.data();
  std::vector<int64_t> dropped(2 * size_t(kLogitThresholds + 1), 0);
  try {
    DeferredReadBacks late(d);
    logit_histogram(d, z, y, b.z.size(), b.thr.data(), dropped.data());
    throw std::runtime_error("a failed step");
  } catch (const std::runtime_error&) {
  }
  b.g.ctx->finish_read_backs();  // nothing pending any more
  CHECK(dropped == std::vector<int64_t>(dropped.size(), 0));
  std::vector<int64_t> now(dropped.size(), 0);
  logit_histogram(d, z, y, b.z.size(), b.thr.data(), now.data());
  int64_t total = 0;
  for (int64_t c : now) total += c;
  CHECK(total == int64_t(b.z.size()));
}

TEST_CASE("GPU dice_loss_grad forms the Dice coefficients on the device, as the CPU does, its sums read late",
          "[gpu][gpu_ops][read_backs]") {
  TRAINER_REQUIRE_GPU();
  GpuBatch b;
  for (const bool with_bce : {false, true}) {
    INFO("with_bce " << with_bce);
    auto run = [&](const Device& d, std::vector<double>& sums) {
      Buffer<float> z = upload(b.z, d), y = upload(b.y, d), grad(d, b.z.size());
      sums.assign(size_t(b.n) * 4, -1.0);
      DeferredReadBacks late(d);
      dice_loss_grad(d, z.data(), y.data(), b.n, b.m, with_bce, sums.data(), grad.data());
      if (d.is_cuda()) CHECK(sums == std::vector<double>(sums.size(), -1.0));  // the gradient did not wait for them
      late.finish();
      return download(grad);
    };
    std::vector<double> sums_gpu, sums_cpu;
    const std::vector<float> gpu = run(b.d, sums_gpu), cpu = run(Device{}, sums_cpu);
    CHECK_CLOSE("dice_loss_grad sums", sums_gpu, sums_cpu, 1e-9);
    // The coefficients come from sums that differ in the last bits (another order of addition).
    CHECK_CLOSE("dice_loss_grad", gpu, cpu, 1e-5);
  }
}
