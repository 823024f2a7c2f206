#pragma once
// Segmentation metrics as pixel counts that add across batches and towers, so
// an epoch's metric is computed from totals over the whole set (never an
// average of per-batch averages).
#include <array>
#include <string>

#include "core/tensor.h"

namespace trainer {

/// Sums over pixels from which every metric is computed; they add across batches and towers.
/// Layout of v (foreground = target > 0.5, prediction at threshold t = sigmoid(z) > t):
///   v[i]                  i < 10: intersection count |pred_t AND fg| at t = 0.50 + 0.05 i
///   v[10 + i]             i < 10: union count |pred_t OR fg| at the same t
///   v[kTp]                true positives at 0.5
///   v[kPredPos]           predicted positives at 0.5
///   v[kTruePos]           foreground pixels
///   v[kCorrect]           pixels with (prediction at 0.5) == foreground
///   v[kTotal]             pixels counted
struct MetricCounts {
  static constexpr int kThresholds = 10;  // 0.50, 0.55, ..., 0.95
  static constexpr int kSize = 2 * kThresholds + 5;
  static constexpr int kTp = 2 * kThresholds, kPredPos = kTp + 1, kTruePos = kTp + 2, kCorrect = kTp + 3,
                       kTotal = kTp + 4;
  std::array<double, kSize> v{};

  /// Element-wise v += o.v.
  void add(const MetricCounts& o);
  /// Mean over the 10 thresholds of I_t / U_t (the foreground IoU of sigmoid(z) > t,
  /// the Kaggle DSB 2018 threshold sweep on pixels). A threshold with U_t == 0 counts
  /// as 1.0: an empty prediction of an empty mask is perfect.
  double mean_iou() const;
  /// 2 TP / (pred_pos + true_pos) at threshold 0.5; 1.0 when both are 0.
  double dice() const;
  /// correct / total at threshold 0.5; 0 when nothing was counted.
  double accuracy() const;
  /// TP / pred_pos at threshold 0.5 (keras.metrics.Precision); 0 when nothing
  /// is predicted positive, as Keras's divide_no_nan.
  double precision() const;
  /// TP / true_pos at threshold 0.5 (keras.metrics.Recall); 0 without foreground.
  double recall() const;
  /// "mean_iou" | "dice" | "accuracy" | "precision" | "recall";
  /// std::invalid_argument otherwise (config
  /// validation reports unknown metric names to the user).
  double value(const std::string& metric) const;
};

/// Adds the counts of a batch. logits, targets: [N, H, W, 1] (any C: every value is a
/// pixel), both on logits.device(). The prediction at threshold t is sigmoid(z) > t,
/// evaluated as z > logit(t) (the same in exact arithmetic, one compare per
/// threshold), binned in one pass by the backend's logit_histogram.
/// Throws std::invalid_argument when the shapes differ.
void accumulate_metrics(const Tensor& logits, const Tensor& targets, MetricCounts& counts);

}  // namespace trainer
