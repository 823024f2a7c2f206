// Deferred read-backs on the CPU side: the DeferredReadBacks guard's calls
// on a device context, and the loss and metric counts queued for a late
// read (QueuedLoss, QueuedMetrics) giving what loss_sum and
// accumulate_metrics give. The GPU side, where the values really arrive
// late, is tests/test_gpu_read_backs.cpp.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "layer_testing.h"
#include "stub_device_context.h"
#include "train/loss.h"
#include "train/metrics.h"

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

TEST_CASE("queue_loss reads the cross-entropies, dice and bce_dice late and gives loss_sum's value and gradient for "
          "every binary loss",
          "[read_backs][loss]") {
  const Shape s{3, 5, 4, 1};
  const Tensor z = testing::random_tensor(s, 11u, -3.f, 3.f), y = random_mask(s, 12u);
  CrossEntropyForm focal;
  focal.gamma = 2.f;
  struct Case {
    LossKind kind;
    CrossEntropyForm form;
    bool late;
  };
  for (const Case& c : {Case{LossKind::BinaryCrossentropy, {}, true}, Case{LossKind::Dice, {}, true},
                        Case{LossKind::BceDice, {}, true}, Case{LossKind::KerasDice, {}, false},
                        Case{LossKind::BinaryFocalCrossentropy, focal, true}}) {
    INFO(loss_name(c.kind));
    Tensor g_now, g_queued;
    const double now = loss_sum(c.kind, z, y, &g_now, std::nullopt, c.form);
    QueuedLoss q;
    queue_loss(q, c.kind, z, y, &g_queued, std::nullopt, c.form);
    CHECK(q.late == c.late);
    CHECK(q.value() == now);
    REQUIRE(g_queued.numel() == g_now.numel());
    for (size_t i = 0; i < g_now.numel(); ++i) CHECK(g_queued.data()[i] == g_now.data()[i]);
  }
  // Categorical: one sum, over the pixels of a sample (or times a pixel weight).
  const int k = 3;
  const Shape sk{2, 3, 4, k};
  const Tensor zk = testing::random_tensor(sk, 13u, -3.f, 3.f);
  Tensor yk(Shape{2, 3, 4, 1});
  for (size_t i = 0; i < yk.numel(); ++i) yk.data()[i] = float(i % k);
  for (const std::optional<double> weight : {std::optional<double>{}, std::optional<double>{0.125}}) {
    Tensor g_now, g_queued;
    const double now = loss_sum(LossKind::SparseCategoricalCrossentropy, zk, yk, &g_now, weight);
    QueuedLoss q;
    queue_loss(q, LossKind::SparseCategoricalCrossentropy, zk, yk, &g_queued, weight);
    CHECK(q.late);
    CHECK(q.value() == now);
    for (size_t i = 0; i < g_now.numel(); ++i) CHECK(g_queued.data()[i] == g_now.data()[i]);
  }
  // A late loss is formed from the sums the device delivers: each sample's mean cross-entropy.
  QueuedLoss q;
  queue_loss(q, LossKind::BinaryCrossentropy, z, y, nullptr);
  REQUIRE(q.sums.size() == 12);
  q.sums = {20, 0, 0, 0, 40, 0, 0, 0, 60, 0, 0, 0};
  CHECK(q.value() == Approx((20.0 + 40.0 + 60.0) / 20.0));
  // bce_dice: each sample's mean cross-entropy and its Dice loss from its sums (bce, sum p y, sum p, sum y).
  queue_loss(q, LossKind::BceDice, z, y, nullptr);
  REQUIRE(q.sums.size() == 12);
  q.sums = {20, 3, 4, 5, 0, 0, 0, 0, 40, 10, 10, 10};
  CHECK(q.value() == Approx(1.0 + (1 - 7.0 / 10.0) + (1 - 1.0 / 1.0) + 2.0 + (1 - 21.0 / 21.0)));
}

TEST_CASE("queue_metrics then add_metrics give accumulate_metrics's counts, for the layout they were queued for",
          "[read_backs][metrics]") {
  const Shape s{2, 6, 7, 1};
  const Tensor z = testing::random_tensor(s, 21u, -4.f, 4.f), y = random_mask(s, 22u);
  for (const bool auc : {false, true}) {
    MetricCounts now(0, auc), queued(0, auc);
    accumulate_metrics(z, y, now);
    QueuedMetrics q;
    queue_metrics(q, z, y, queued);
    add_metrics(q, queued);
    CHECK(queued.v == now.v);
    MetricCounts other(0, !auc);
    CHECK_THROWS_AS(add_metrics(q, other), InternalError);
  }
  const int k = 3;
  const Tensor zk = testing::random_tensor(Shape{2, 6, 7, k}, 23u, -4.f, 4.f);
  Tensor yk(Shape{2, 6, 7, 1});
  for (size_t i = 0; i < yk.numel(); ++i) yk.data()[i] = float(i % k);
  MetricCounts now(k), queued(k);
  accumulate_metrics(zk, yk, now);
  QueuedMetrics q;
  queue_metrics(q, zk, yk, queued);
  add_metrics(q, queued);
  CHECK(queued.v == now.v);
}
