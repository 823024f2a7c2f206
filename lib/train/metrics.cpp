#include "train/metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "backend/train_ops.h"
#include "core/error.h"

namespace trainer {

void MetricCounts::add(const MetricCounts& o) {
  if (o.classes_ != classes_ || o.auc_ != auc_) {
    const auto zero = [](const std::vector<double>& x) {
      return std::all_of(x.begin(), x.end(), [](double e) { return e == 0; });
    };
    if (zero(o.v)) return;  // zero counts of another layout (a default BatchStats) add nothing
    if (!zero(v))
      throw InternalError("metrics: counts of " + std::to_string(o.classes_) + " classes (AUC " +
                          std::to_string(o.auc_) + ") added to counts of " + std::to_string(classes_) +
                          " classes (AUC " + std::to_string(auc_) + ")");
    *this = MetricCounts(o.classes_, o.auc_);
  }
  for (size_t i = 0; i < o.v.size(); ++i) v[i] += o.v[i];
}

namespace {

/// Class c's IoU (or, with dice, 2 TP / (truth + predicted)) from the confusion counts; NaN when its
/// denominator is 0.
double class_score(const MetricCounts& counts, int c, bool dice) {
  const int k = counts.classes();
  const double* m = counts.v.data() + MetricCounts::kSize;
  double truth = 0, predicted = 0;
  for (int i = 0; i < k; ++i) {
    truth += m[size_t(c) * size_t(k) + size_t(i)];
    predicted += m[size_t(i) * size_t(k) + size_t(c)];
  }
  const double tp = m[size_t(c) * size_t(k) + size_t(c)];
  const double den = dice ? truth + predicted : truth + predicted - tp;
  return den == 0 ? std::nan("") : (dice ? 2 * tp : tp) / den;
}

/// The mean of class_score over the classes where it is defined; 0 when it is nowhere.
double mean_over_classes(const MetricCounts& counts, bool dice) {
  double sum = 0;
  int present = 0;
  for (int c = 0; c < counts.classes(); ++c) {
    const double s = class_score(counts, c, dice);
    if (std::isnan(s)) continue;
    sum += s;
    ++present;
  }
  return present ? sum / present : 0.0;
}

}  // namespace

double MetricCounts::class_iou(int c) const {
  if (c < 0 || c >= classes_) throw InternalError("metrics: class " + std::to_string(c) + " of " +
                                                          std::to_string(classes_));
  return class_score(*this, c, false);
}

double MetricCounts::mean_iou() const {
  if (classes_ > 0) return mean_over_classes(*this, false);
  double sum = 0;
  for (int t = 0; t < kThresholds; ++t) {
    const double u = v[kThresholds + t];
    sum += u == 0 ? 1.0 : v[t] / u;
  }
  return sum / kThresholds;
}

double MetricCounts::dice() const {
  if (classes_ > 0) return mean_over_classes(*this, true);
  const double den = v[kPredPos] + v[kTruePos];
  return den == 0 ? 1.0 : 2 * v[kTp] / den;
}

double MetricCounts::accuracy() const {
  if (classes_ == 0) return v[kTotal] == 0 ? 0.0 : v[kCorrect] / v[kTotal];
  double correct = 0, total = 0;
  for (int t = 0; t < classes_; ++t)
    for (int p = 0; p < classes_; ++p) {
      const double n = v[size_t(kSize) + size_t(t) * size_t(classes_) + size_t(p)];
      total += n;
      if (t == p) correct += n;
    }
  return total == 0 ? 0.0 : correct / total;
}

double MetricCounts::precision() const { return v[kPredPos] == 0 ? 0.0 : v[kTp] / v[kPredPos]; }

double MetricCounts::recall() const { return v[kTruePos] == 0 ? 0.0 : v[kTp] / v[kTruePos]; }

double MetricCounts::binary_iou() const {
  const double tp = v[kTp], fp = v[kPredPos] - tp, fn = v[kTruePos] - tp, tn = v[kTotal] - tp - fp - fn;
  double sum = 0;
  int valid = 0;
  for (const auto& [hit, den] : {std::pair<double, double>{tn, tn + fp + fn}, {tp, tp + fp + fn}})
    if (den > 0) sum += hit / den, ++valid;
  return valid ? sum / valid : 0.0;
}

double MetricCounts::auc() const {
  if (!auc_) throw InternalError("metrics: AUC asked of counts made without its histogram");
  constexpr int n = kAucThresholds;
  const double* bg = v.data() + auc_offset();
  const double* fg = bg + n;
  double pos = 0, neg = 0;
  for (int b = 0; b < n; ++b) pos += fg[b], neg += bg[b];
  // Threshold i's positives are the pixels of buckets >= i: walk i down from the top.
  double tp = 0, fp = 0, area = 0, r_above = 0, f_above = 0;
  for (int i = n - 1; i >= 0; --i) {
    tp += fg[i];
    fp += bg[i];
    const double r = pos == 0 ? 0.0 : tp / pos, f = neg == 0 ? 0.0 : fp / neg;
    if (i < n - 1) area += (f - f_above) * (r + r_above) / 2;
    r_above = r;
    f_above = f;
  }
  return area;
}

double MetricCounts::value(const std::string& metric) const {
  if (metric == "mean_iou") return mean_iou();
  if (metric == "mean_io_u") {
    if (classes_ == 0) throw InternalError("metric 'mean_io_u' (Keras's MeanIoU) is for categorical models");
    return mean_iou();
  }
  if (metric == "dice") return dice();
  if (metric == "accuracy") return accuracy();
  const bool binary_only = metric == "precision" || metric == "recall" || metric == "binary_iou" ||
                           metric == "binary_accuracy" || metric == "binary_io_u" || metric == "auc";
  if (binary_only && classes_ > 0)
    throw InternalError("metric '" + metric + "' is for binary models, not " + std::to_string(classes_) +
                                " classes");
  if (metric == "precision") return precision();
  if (metric == "recall") return recall();
  if (metric == "binary_iou" || metric == "binary_io_u") return binary_iou();
  if (metric == "binary_accuracy") return accuracy();
  if (metric == "auc") return auc();
  throw InternalError("unknown metric '" + metric + "'");
}

namespace {

/// The logits sigmoid(z) > t compares with: log(t / (1 - t)) at the ascending thresholds t.
std::array<float, MetricCounts::kThresholds> logit_thresholds() {
  constexpr int T = MetricCounts::kThresholds;
  static_assert(T == kLogitThresholds, "the backend's histogram has one bin per metric threshold");
  std::array<float, T> thr{};
  for (int t = 0; t < T; ++t) {
    const double p = 0.5 + 0.05 * t;
    thr[size_t(t)] = float(std::log(p / (1 - p)));
  }
  return thr;
}

/// The binary counts from hist [2, T + 1]: hist[fg][k] holds the pixels of foreground fg whose logit exceeds
/// exactly the k lowest thresholds (predictions are monotone in t). Every count follows from it.
void add_binary_counts(const int64_t* hist, MetricCounts& counts) {
  constexpr int T = MetricCounts::kThresholds, B = T + 1;
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
    counts.v[size_t(t)] += double(pred_fg);
    counts.v[size_t(T + t)] += double(pred_bg + fg_total);
  }
  // At t = 0.5 (index 0) pred_fg / pred_bg now hold the positives at 0.5.
  counts.v[MetricCounts::kTp] += double(pred_fg);
  counts.v[MetricCounts::kPredPos] += double(pred_fg + pred_bg);
  counts.v[MetricCounts::kTruePos] += double(fg_total);
  counts.v[MetricCounts::kCorrect] += double(pred_fg + bg[0]);
  counts.v[MetricCounts::kTotal] += double(total);
}

}  // namespace

void queue_metrics(QueuedMetrics& q, const Tensor& logits, const Tensor& targets, const MetricCounts& counts) {
  q.classes = counts.classes();
  q.auc = counts.has_auc();
  const Device& d = logits.device();
  if (const int k = q.classes; k > 0) {
    const Shape z = logits.shape(), y = targets.shape();
    if (z.c != k || y.c != 1 || z.n != y.n || z.h != y.h || z.w != y.w)
      throw InternalError("metrics: logits " + z.nhwc() + " and targets " + y.nhwc() + " are not [N, H, W, " +
                                  std::to_string(k) + "] and [N, H, W, 1]");
    q.confusion.assign(size_t(k) * size_t(k), 0);
    class_confusion(d, logits.data(), targets.data(), targets.numel(), k, q.confusion.data());
    return;
  }
  if (logits.shape() != targets.shape())
    throw InternalError("metrics: logits " + logits.shape().nhwc() + " and targets " +
                                targets.shape().nhwc() + " differ in shape");
  const auto thr = logit_thresholds();
  q.hist.assign(2 * size_t(MetricCounts::kThresholds + 1), 0);
  logit_histogram(d, logits.data(), targets.data(), logits.numel(), thr.data(), q.hist.data());
  if (!q.auc) return;
  q.buckets.assign(2 * size_t(MetricCounts::kAucThresholds), 0);
  probability_histogram(d, logits.data(), targets.data(), logits.numel(), MetricCounts::kAucThresholds,
                        q.buckets.data());
}

void add_metrics(const QueuedMetrics& q, MetricCounts& counts) {
  if (q.classes != counts.classes() || q.auc != counts.has_auc())
    throw InternalError("metrics: counts queued for another layout");
  if (q.classes > 0) {
    for (size_t i = 0; i < q.confusion.size(); ++i) counts.v[size_t(MetricCounts::kSize) + i] += double(q.confusion[i]);
    return;
  }
  add_binary_counts(q.hist.data(), counts);
  if (!q.auc) return;
  double* out = counts.v.data() + counts.v.size() - q.buckets.size();
  for (size_t b = 0; b < q.buckets.size(); ++b) out[b] += double(q.buckets[b]);
}

void accumulate_metrics(const Tensor& logits, const Tensor& targets, MetricCounts& counts) {
  thread_local QueuedMetrics q;  // per tower thread: no allocation once sized
  queue_metrics(q, logits, targets, counts);
  finish_read_backs(logits.device());
  add_metrics(q, counts);
}

}  // namespace trainer
