// Deferred read-backs on the CPU side: the DeferredReadBacks guard's calls
// on a device context; the losses queued for a late read (QueuedLoss) with
// the values and gradients of the host formulas they replace, bit for bit,
// and values formed from delivered sums; the metric counts formed from a
// delivered histogram (QueuedMetrics). The GPU side, where the values
// really arrive late, is tests/test_gpu_read_backs.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/train_ops.h"
#include "config/config.h"
#include "core/error.h"
#include "layer_testing.h"
#include "stub_device_context.h"
#include "train/loss.h"
#include "train/metrics.h"
#include "train/trainer.h"
#include "tiny_model.h"

using namespace trainer;

namespace {

/// A context that writes down the read-back calls it gets, in order.
class CallLog final : public StubDeviceContext {
 public:
  std::string calls;
  bool fail_finish = false;
  void defer_read_backs() override { calls += "defer "; }
  void finish_read_backs() override {
    calls += "finish ";
    if (fail_finish) throw InternalError("device error");
  }
  void stop_deferring_read_backs() noexcept override { calls += "stop "; }
};

/// Binary 0/1 targets of shape s.
Tensor random_mask(Shape s, unsigned seed) {
  Tensor t = testing::random_tensor(s, seed, 0.f, 1.f);
  for (size_t i = 0; i < t.numel(); ++i) t.data()[i] = t.data()[i] > 0.5f ? 1.f : 0.f;
  return t;
}

}  // namespace

TEST_CASE("DeferredReadBacks defers, delivers at finish, and drops what an error leaves", "[read_backs]") {
  CallLog log;
  const Device d{DeviceKind::CPU, -1, &log};
  {
    DeferredReadBacks late(d);
    CHECK(log.calls == "defer ");
    finish_read_backs(d);  // a read wanted at once: delivered, still deferring
    late.finish();
  }  // finished: leaving the scope adds nothing
  CHECK(log.calls == "defer finish finish stop ");
  log.calls.clear();
  try {
    DeferredReadBacks late(d);
    throw std::runtime_error("a failed step");
  } catch (const std::runtime_error&) {
  }
  CHECK(log.calls == "defer stop ");
  log.calls.clear();
  log.fail_finish = true;
  {
    DeferredReadBacks late(d);
    CHECK_THROWS_AS(late.finish(), InternalError);
  }
  CHECK(log.calls == "defer finish stop ");
  DeferredReadBacks none(Device{});  // a CPU device without a context: nothing to defer
  none.finish();
}

namespace {

/// g [n, m] <- segmentation_loss_grad with coefficients [n, 3] on the CPU.
std::vector<float> segmentation_gradient(const Tensor& z, const Tensor& y, const std::vector<float>& coef) {
  std::vector<float> g(z.numel());
  segmentation_loss_grad(Device{}, z.data(), y.data(), z.shape().n, z.shape().sample_numel(), coef.data(), g.data());
  return g;
}

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.data(), t.data() + t.numel()); }

}  // namespace

TEST_CASE("queue_loss reads the cross-entropies, dice and bce_dice late, with the value and gradient of the host "
          "formulas, bit for bit",
          "[read_backs][loss]") {
  const Shape s{3, 5, 4, 1};
  const int n = s.n;
  const size_t m = s.sample_numel();
  const double inv_m = 1.0 / double(m);
  const Tensor z = testing::random_tensor(s, 11u, -3.f, 3.f), y = random_mask(s, 12u);
  QueuedLoss q;
  Tensor g;
  SECTION("binary_crossentropy: each sample's bce sum over m; g = (p - y) / m") {
    std::vector<double> sums(size_t(n) * 4);
    segmentation_sums(Device{}, z.data(), y.data(), n, m, true, false, sums.data());
    double ref = 0;
    std::vector<float> coef(size_t(n) * 3, 0.f);
    for (int k = 0; k < n; ++k) ref += sums[size_t(k) * 4] * inv_m, coef[size_t(k) * 3] = float(inv_m);
    queue_loss(q, LossKind::BinaryCrossentropy, z, y, &g);
    CHECK(q.late);
    CHECK(q.value() == ref);
    CHECK(values(g) == segmentation_gradient(z, y, coef));
  }
  SECTION("dice and bce_dice: coefficients from each sample's sums") {
    for (const LossKind kind : {LossKind::Dice, LossKind::BceDice}) {
      INFO(loss_name(kind));
      const bool bce = kind == LossKind::BceDice;
      std::vector<double> sums(size_t(n) * 4);
      segmentation_sums(Device{}, z.data(), y.data(), n, m, bce, true, sums.data());
      double ref = 0;
      std::vector<float> coef(size_t(n) * 3);
      for (int k = 0; k < n; ++k) {
        const double* ss = sums.data() + size_t(k) * 4;
        const double num = 2 * ss[1] + 1, den = ss[2] + ss[3] + 1;
        if (bce) ref += ss[0] * inv_m;
        ref += 1 - num / den;
        coef[size_t(k) * 3] = bce ? float(inv_m) : 0.f;
        coef[size_t(k) * 3 + 1] = float(-2.0 / den);
        coef[size_t(k) * 3 + 2] = float(num / (den * den));
      }
      queue_loss(q, kind, z, y, &g);
      CHECK(q.late);
      CHECK(q.value() == ref);
      CHECK(values(g) == segmentation_gradient(z, y, coef));
    }
  }
  SECTION("binary_focal_crossentropy: one sum over m") {
    CrossEntropyForm focal;
    focal.gamma = 2.f;
    double sum = 0;
    sigmoid_focal_sum(Device{}, z.data(), y.data(), z.numel(), focal, &sum);
    std::vector<float> ref_g(z.numel());
    sigmoid_focal_grad(Device{}, z.data(), y.data(), z.numel(), focal, float(inv_m), ref_g.data());
    queue_loss(q, LossKind::BinaryFocalCrossentropy, z, y, &g, std::nullopt, focal);
    CHECK(q.late);
    CHECK(q.value() == sum / double(m));
    CHECK(values(g) == ref_g);
  }
  SECTION("sparse_categorical_crossentropy: one sum over the pixels of a sample, or times a pixel weight") {
    const int k = 3;
    const Tensor zk = testing::random_tensor(Shape{2, 3, 4, k}, 13u, -3.f, 3.f);
    Tensor yk(Shape{2, 3, 4, 1});
    for (size_t i = 0; i < yk.numel(); ++i) yk.data()[i] = float(i % k);
    double sum = 0;
    softmax_loss_sum(Device{}, zk.data(), yk.data(), yk.numel(), k, {}, &sum);
    queue_loss(q, LossKind::SparseCategoricalCrossentropy, zk, yk, &g);
    CHECK(q.late);
    CHECK(q.value() == sum / 12.0);
    queue_loss(q, LossKind::SparseCategoricalCrossentropy, zk, yk, &g, 0.125);
    CHECK(q.value() == sum * 0.125);
    std::vector<float> ref_g(zk.numel());
    softmax_loss_grad(Device{}, zk.data(), yk.data(), yk.numel(), k, {}, 0.125f, ref_g.data());
    CHECK(values(g) == ref_g);
  }
  SECTION("Keras's Dice forms its coefficients on the host: read at once") {
    queue_loss(q, LossKind::KerasDice, z, y, &g);
    CHECK_FALSE(q.late);
    CHECK(q.value() == loss_sum(LossKind::KerasDice, z, y, nullptr));
  }
  SECTION("a late value is formed from the sums the device delivers") {
    queue_loss(q, LossKind::BinaryCrossentropy, z, y, nullptr);
    REQUIRE(q.sums.size() == 12);
    q.sums = {20, 0, 0, 0, 40, 0, 0, 0, 60, 0, 0, 0};
    CHECK(q.value() == Approx((20.0 + 40.0 + 60.0) / 20.0));
    // bce_dice: each sample's mean cross-entropy and its Dice loss from (bce, sum p y, sum p, sum y).
    queue_loss(q, LossKind::BceDice, z, y, nullptr);
    REQUIRE(q.sums.size() == 12);
    q.sums = {20, 3, 4, 5, 0, 0, 0, 0, 40, 10, 10, 10};
    CHECK(q.value() == Approx(1.0 + (1 - 7.0 / 10.0) + (1 - 1.0 / 1.0) + 2.0 + (1 - 21.0 / 21.0)));
  }
}

TEST_CASE("add_metrics turns the delivered histogram into the counts, for the layout it was queued for",
          "[read_backs][metrics]") {
  const Shape s{2, 6, 7, 1};
  const Tensor z = testing::random_tensor(s, 21u, -4.f, 4.f), y = random_mask(s, 22u);
  QueuedMetrics q;
  MetricCounts counts;
  queue_metrics(q, z, y, counts);
  REQUIRE(q.hist.size() == 2 * size_t(MetricCounts::kThresholds + 1));
  // As a device would deliver them: 5 background pixels below every threshold, 3 foreground ones above all.
  std::fill(q.hist.begin(), q.hist.end(), 0);
  q.hist[0] = 5;
  q.hist.back() = 3;
  add_metrics(q, counts);
  CHECK(counts.v[MetricCounts::kTotal] == 8);
  CHECK(counts.v[MetricCounts::kTruePos] == 3);
  CHECK(counts.v[MetricCounts::kTp] == 3);
  CHECK(counts.v[MetricCounts::kPredPos] == 3);
  CHECK(counts.v[MetricCounts::kCorrect] == 8);
  MetricCounts other(0, true);
  CHECK_THROWS_AS(add_metrics(q, other), InternalError);
  MetricCounts classes(3);
  CHECK_THROWS_AS(add_metrics(q, classes), InternalError);
}

TEST_CASE("evaluate reads its batches' losses and counts in groups: 70 batches of one sample give the totals of "
          "one batch of 70",
          "[read_backs][metrics]") {
  const Config config = parse_config(
      "model:\n  layers:\n    - {type: Input, shape: [16, 16, 3]}\n"
      "    - {type: Rescaling, scale: 0.00392156862745098}\n"
      "    - {type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}\n"
      "data: {images: unused, masks: unused}\n"
      "training: {batch_size: 5, seed: 7, loss: bce_dice, metrics: [mean_iou, auc]}\n",
      "pointwise.yaml");
  Trainer t(config, 1, 1);
  const Dataset data = testing::tiny_data();
  std::vector<int> indices;  // more batches of one than Trainer::kLateBatches
  for (int i = 0; i < 70; ++i) indices.push_back(i % data.size());
  REQUIRE(indices.size() > Trainer::kLateBatches);
  const BatchStats ones = t.evaluate(data, indices, 1), whole = t.evaluate(data, indices, 70);
  CHECK(ones.samples == 70);
  CHECK(ones.loss_sum == Approx(whole.loss_sum).epsilon(1e-12));
  CHECK(ones.counts.v == whole.counts.v);
}
