#include "train/metrics.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "backend/train_ops.h"

namespace trainer {

void MetricCounts::add(const MetricCounts& o) {
  for (int i = 0; i < kSize; ++i) v[i] += o.v[i];
}

double MetricCounts::mean_iou() const {
  double sum = 0;
  for (int t = 0; t < kThresholds; ++t) {
    const double u = v[kThresholds + t];
    sum += u == 0 ? 1.0 : v[t] / u;
  }
  return sum / kThresholds;
}

double MetricCounts::dice() const {
  const double den = v[kPredPos] + v[kTruePos];
  return den == 0 ? 1.0 : 2 * v[kTp] / den;
}

double MetricCounts::accuracy() const { return v[kTotal] == 0 ? 0.0 : v[kCorrect] / v[kTotal]; }

double MetricCounts::precision() const { return v[kPredPos] == 0 ? 0.0 : v[kTp] / v[kPredPos]; }

double MetricCounts::recall() const { return v[kTruePos] == 0 ? 0.0 : v[kTp] / v[kTruePos]; }

double MetricCounts::value(const std::string& metric) const {
  if (metric == "mean_iou") return mean_iou();
  if (metric == "dice") return dice();
  if (metric == "accuracy") return accuracy();
  if (metric == "precision") return precision();
  if (metric == "recall") return recall();
  throw std::invalid_argument("unknown metric '" + metric + "' (known: mean_iou, dice, accuracy, precision, recall)");
}

void accumulate_metrics(const Tensor& logits, const Tensor& targets, MetricCounts& counts) {
  if (logits.shape() != targets.shape())
    throw std::invalid_argument("metrics: logits " + logits.shape().nhwc() + " and targets " +
                                targets.shape().nhwc() + " differ in shape");
  constexpr int T = MetricCounts::kThresholds;
  static_assert(T == kLogitThresholds, "the backend's histogram has one bin per metric threshold");
  // sigmoid(z) > t  <=>  z > log(t / (1 - t)); ascending thresholds.
  float thr[T];
  for (int t = 0; t < T; ++t) {
    const double p = 0.5 + 0.05 * t;
    thr[t] = float(std::log(p / (1 - p)));
  }
  // hist[fg][k]: pixels with foreground fg whose logit exceeds exactly the k lowest
  // thresholds (predictions are monotone in t). Every count follows from it.
  constexpr int B = T + 1;
  int64_t hist[2 * B] = {};
  logit_histogram(logits.device(), logits.data(), targets.data(), logits.numel(), thr, hist);
  const int64_t* bg = hist;
  const int64_t* fg = hist + B;
  int64_t fg_total = 0, total = 0;
  for (int k = 0; k < B; ++k) {
    fg_total += fg[k];
    total += fg[k] + bg[k];
  }
  // Walk thresholds from the highest down, accumulating pixels predicted positive.
  int64_t pred_fg = 0, pred_bg = 0;
  for (int t = T - 1; t >= 0; --t) {
    pred_fg += fg[t + 1];  // pixels with k > t are predicted positive at threshold t
    pred_bg += bg[t + 1];
    counts.v[t] += double(pred_fg);
    counts.v[T + t] += double(pred_bg + fg_total);
  }
  // At t = 0.5 (index 0) pred_fg / pred_bg now hold the positives at 0.5.
  counts.v[MetricCounts::kTp] += double(pred_fg);
  counts.v[MetricCounts::kPredPos] += double(pred_fg + pred_bg);
  counts.v[MetricCounts::kTruePos] += double(fg_total);
  counts.v[MetricCounts::kCorrect] += double(pred_fg + bg[0]);
  counts.v[MetricCounts::kTotal] += double(total);
}

}  // namespace trainer
