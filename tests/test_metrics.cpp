// Metrics: counts against a brute-force per-pixel reference, a hand example
// with the U_t == 0 rule, and additivity across batches.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/error.h"
#include "layer_testing.h"
#include "train/callbacks.h"
#include "train/metrics.h"

using namespace trainer;

namespace {

// Straightforward reference: sigmoid in double, compare with each threshold.
MetricCounts brute_force(const Tensor& z, const Tensor& y) {
  MetricCounts c;
  for (size_t i = 0; i < z.numel(); ++i) {
    const double p = 1 / (1 + std::exp(-double(z.data()[i])));
    const bool fg = y.data()[i] > 0.5f;
    for (int t = 0; t < MetricCounts::kThresholds; ++t) {
      const bool pred = p > 0.5 + 0.05 * t;
      c.v[t] += pred && fg;
      c.v[MetricCounts::kThresholds + t] += pred || fg;
    }
    const bool pred = p > 0.5;
    c.v[MetricCounts::kTp] += pred && fg;
    c.v[MetricCounts::kPredPos] += pred;
    c.v[MetricCounts::kTruePos] += fg;
    c.v[MetricCounts::kCorrect] += pred == fg;
    c.v[MetricCounts::kTotal] += 1;
  }
  return c;
}

Tensor random_mask(Shape s, unsigned seed) {
  Tensor t = testing::random_tensor(s, seed, 0.f, 1.f);
  for (size_t i = 0; i < t.numel(); ++i) t.data()[i] = t.data()[i] > 0.6f ? 1.f : 0.f;
  return t;
}

Tensor samples(const Tensor& t, int first, int count) {
  Tensor out(t.shape().with_batch(count));
  std::memcpy(out.data(), t.sample(first), out.numel() * sizeof(float));
  return out;
}

}  // namespace

TEST_CASE("metric counts equal a brute-force reference on random data", "[metrics]") {
  const Shape s{3, 17, 19, 1};
  Tensor z = testing::random_tensor(s, 5, -4.f, 4.f);
  Tensor y = random_mask(s, 6);
  MetricCounts got;
  accumulate_metrics(z, y, got);
  const MetricCounts want = brute_force(z, y);
  for (int i = 0; i < MetricCounts::kSize; ++i) {
    INFO("index " << i);
    CHECK(got.v[i] == want.v[i]);
  }
  CHECK(got.v[MetricCounts::kTotal] == double(s.numel()));
}

TEST_CASE("hand example: IoU per threshold, dice, accuracy", "[metrics]") {
  // sigmoid: 3 -> 0.953, -3 -> 0.047, 0.1 -> 0.525, -0.1 -> 0.475; mask 1 0 1 0.
  Tensor z(Shape{1, 2, 2, 1}), y(Shape{1, 2, 2, 1});
  const float zv[] = {3.f, -3.f, 0.1f, -0.1f}, yv[] = {1.f, 0.f, 1.f, 0.f};
  for (int i = 0; i < 4; ++i) z.data()[i] = zv[i], y.data()[i] = yv[i];
  MetricCounts c;
  accumulate_metrics(z, y, c);
  // t = 0.50: prediction 1 0 1 0, IoU 2/2; t >= 0.55: prediction 1 0 0 0, IoU 1/2.
  CHECK(c.mean_iou() == Approx((1.0 + 9 * 0.5) / 10));
  CHECK(c.dice() == Approx(1.0));
  CHECK(c.accuracy() == Approx(1.0));
  CHECK(c.value("mean_iou") == c.mean_iou());
  CHECK(c.value("dice") == c.dice());
  CHECK(c.value("accuracy") == c.accuracy());
  CHECK_THROWS_AS(c.value("f1"), InternalError);
}

TEST_CASE("precision and recall at 0.5, as keras.metrics.Precision and Recall", "[metrics]") {
  // sigmoid > 0.5 for z > 0: predictions 1 1 0 1 0 0, mask 1 0 1 1 0 1: TP 2, 3 predicted, 4 foreground.
  Tensor z(Shape{1, 1, 6, 1}), y(Shape{1, 1, 6, 1});
  const float zv[] = {2.f, 1.f, -1.f, 0.5f, -2.f, -3.f}, yv[] = {1.f, 0.f, 1.f, 1.f, 0.f, 1.f};
  for (int i = 0; i < 6; ++i) z.data()[i] = zv[i], y.data()[i] = yv[i];
  MetricCounts c;
  accumulate_metrics(z, y, c);
  CHECK(c.precision() == Approx(2.0 / 3));  // TP 2 of 3 predicted
  CHECK(c.recall() == Approx(2.0 / 4));     // TP 2 of 4 foreground
  CHECK(c.value("precision") == c.precision());
  CHECK(c.value("recall") == c.recall());
  MetricCounts none;  // nothing predicted, no foreground: Keras's divide_no_nan gives 0
  CHECK(none.precision() == 0.0);
  CHECK(none.recall() == 0.0);
  CHECK(monitor_is_max("val_precision", MonitorMode::Auto));
  CHECK(monitor_is_max("recall", MonitorMode::Auto));
}

TEST_CASE("binary_iou is Keras's BinaryIoU(target_class_ids=[0, 1]): background and foreground IoU averaged",
          "[metrics]") {
  // Predictions 1 1 0 1 0 0 against mask 1 0 1 1 0 1: TP 2, FP 1, FN 2, TN 1.
  Tensor z(Shape{1, 1, 6, 1}), y(Shape{1, 1, 6, 1});
  const float zv[] = {2.f, 1.f, -1.f, 0.5f, -2.f, -3.f}, yv[] = {1.f, 0.f, 1.f, 1.f, 0.f, 1.f};
  for (int i = 0; i < 6; ++i) z.data()[i] = zv[i], y.data()[i] = yv[i];
  MetricCounts c;
  accumulate_metrics(z, y, c);
  // Keras: IoU_0 = TN / (TN + FP + FN) = 1 / 4, IoU_1 = TP / (TP + FP + FN) = 2 / 5.
  CHECK(c.binary_iou() == Approx((1.0 / 4 + 2.0 / 5) / 2));
  CHECK(c.value("binary_iou") == c.binary_iou());
  CHECK(c.value("binary_io_u") == c.binary_iou());  // Keras's log name of BinaryIoU
  CHECK(c.value("binary_accuracy") == c.accuracy());
  // All background, predicted so: the foreground's denominator is 0 and it is left out (Keras's num_valid_entries).
  Tensor zb(Shape{1, 1, 3, 1}), yb(Shape{1, 1, 3, 1});
  for (int i = 0; i < 3; ++i) zb.data()[i] = -1.f, yb.data()[i] = 0.f;
  MetricCounts b;
  accumulate_metrics(zb, yb, b);
  CHECK(b.binary_iou() == 1.0);
  CHECK(MetricCounts().binary_iou() == 0.0);
  CHECK(monitor_is_max("val_binary_iou", MonitorMode::Auto));
  CHECK_THROWS_AS(MetricCounts(3).value("binary_iou"), InternalError);
}

namespace {

/// keras.metrics.AUC()'s result written out: the confusion counts at its 200 thresholds (-1e-7,
/// i / 199, 1 + 1e-7) by comparing each probability, in double, then the trapezoids over the ROC curve.
double keras_auc(const Tensor& z, const Tensor& y) {
  constexpr int n = MetricCounts::kAucThresholds;
  std::vector<double> tp(n), fp(n), fn(n), tn(n);
  for (size_t k = 0; k < z.numel(); ++k) {
    const double p = 1 / (1 + std::exp(-double(z.data()[k])));
    const bool fg = y.data()[k] > 0.5f;
    for (int i = 0; i < n; ++i) {
      const double t = i == 0 ? -1e-7 : i == n - 1 ? 1 + 1e-7 : double(i) / (n - 1);
      (p > t ? (fg ? tp : fp) : (fg ? fn : tn))[size_t(i)] += 1;
    }
  }
  double area = 0;
  for (int i = 0; i + 1 < n; ++i) {
    const auto rate = [](double a, double b) { return a + b == 0 ? 0.0 : a / (a + b); };
    const double x0 = rate(fp[i], tn[i]), x1 = rate(fp[i + 1], tn[i + 1]);
    area += (x0 - x1) * (rate(tp[i], fn[i]) + rate(tp[i + 1], fn[i + 1])) / 2;
  }
  return area;
}

}  // namespace

TEST_CASE("auc is keras.metrics.AUC(): ROC, 200 thresholds, trapezoids, and halves add up exactly", "[metrics]") {
  const Shape s{3, 17, 19, 1};
  Tensor z = testing::random_tensor(s, 41, -5.f, 5.f);
  Tensor y = random_mask(s, 42);
  for (size_t i = 0; i < z.numel(); ++i) z.data()[i] += y.data()[i] > 0.5f ? 2.f : 0.f;  // some skill
  MetricCounts c(0, true);
  accumulate_metrics(z, y, c);
  const double want = keras_auc(z, y);
  CHECK(want > 0.6);
  CHECK(c.auc() == Approx(want).margin(1e-9));
  CHECK(c.value("auc") == c.auc());
  MetricCounts plain;
  accumulate_metrics(z, y, plain);
  CHECK(std::equal(plain.v.begin(), plain.v.end(), c.v.begin()));  // the other counts are as without the AUC

  MetricCounts halves(0, true), second(0, true);
  accumulate_metrics(samples(z, 0, 2), samples(y, 0, 2), halves);
  accumulate_metrics(samples(z, 2, 1), samples(y, 2, 1), second);
  halves.add(second);
  CHECK(halves.v == c.v);

  // A perfect ranking gives 1, the reverse 0 (Keras's values too); no foreground gives 0.
  Tensor zp(Shape{1, 1, 4, 1}), yp(Shape{1, 1, 4, 1});
  const float zv[] = {3.f, 1.f, -1.f, -3.f}, yv[] = {1.f, 1.f, 0.f, 0.f};
  for (int i = 0; i < 4; ++i) zp.data()[i] = zv[i], yp.data()[i] = yv[i];
  MetricCounts perfect(0, true), reverse(0, true);
  accumulate_metrics(zp, yp, perfect);
  CHECK(perfect.auc() == Approx(1.0));
  for (int i = 0; i < 4; ++i) zp.data()[i] = -zv[i];
  accumulate_metrics(zp, yp, reverse);
  CHECK(reverse.auc() == Approx(0.0).margin(1e-12));
  CHECK(MetricCounts(0, true).auc() == 0.0);
  CHECK_THROWS_AS(MetricCounts().auc(), InternalError);
  CHECK_THROWS_AS(MetricCounts(3, true).value("auc"), InternalError);
  CHECK(monitor_is_max("val_auc", MonitorMode::Auto));
}

TEST_CASE("mean_io_u is Keras's MeanIoU: the categorical mean_iou, refused for binary counts", "[metrics]") {
  MetricCounts c(2);
  accumulate_metrics(testing::make_tensor({1, 1, 2, 2}, {5, 0, 0, 5}), testing::make_tensor({1, 1, 2, 1}, {0, 0}), c);
  CHECK(c.value("mean_io_u") == c.mean_iou());
  CHECK(c.mean_iou() == Approx(0.25));  // class 0: 1 / 2; class 1: 0 / 1
  CHECK_THROWS_AS(MetricCounts().value("mean_io_u"), InternalError);
}

TEST_CASE("a threshold with an empty union counts as IoU 1", "[metrics]") {
  // Empty mask; one pixel at sigmoid 0.72: predicted positive for t = 0.50..0.70
  // (IoU 0 / 1), nothing predicted for t = 0.75..0.95 (U = 0, counts 1).
  Tensor z(Shape{1, 1, 2, 1}), y(Shape{1, 1, 2, 1});
  z.data()[0] = float(std::log(0.72 / 0.28));
  z.data()[1] = -5.f;
  y.zero();
  MetricCounts c;
  accumulate_metrics(z, y, c);
  CHECK(c.mean_iou() == Approx(0.5));
  CHECK(c.dice() == Approx(0.0));
  CHECK(c.accuracy() == Approx(0.5));

  MetricCounts empty;
  z.data()[0] = -5.f;
  accumulate_metrics(z, y, empty);
  CHECK(empty.mean_iou() == 1.0);
  CHECK(empty.dice() == 1.0);
  CHECK(empty.accuracy() == 1.0);
}

TEST_CASE("counts of two halves add up to the counts of the whole", "[metrics]") {
  const Shape s{4, 9, 7, 1};
  Tensor z = testing::random_tensor(s, 21, -3.f, 3.f);
  Tensor y = random_mask(s, 22);
  MetricCounts whole, halves, second;
  accumulate_metrics(z, y, whole);
  accumulate_metrics(samples(z, 0, 2), samples(y, 0, 2), halves);
  accumulate_metrics(samples(z, 2, 2), samples(y, 2, 2), second);
  halves.add(second);
  for (int i = 0; i < MetricCounts::kSize; ++i) CHECK(halves.v[i] == whole.v[i]);
  CHECK(halves.mean_iou() == whole.mean_iou());
}
