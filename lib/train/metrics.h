#pragma once
// Segmentation metrics as pixel counts that add across batches and towers, so
// an epoch's metric is computed from totals over the whole set (never an
// average of per-batch averages).
#include <string>
#include <vector>

#include "core/tensor.h"

namespace trainer {

/// Sums over pixels from which every metric is computed; they add across batches and towers.
/// Binary models (classes() == 0), layout of v (foreground = target > 0.5,
/// prediction at threshold t = sigmoid(z) > t):
///   v[i]                  i < 10: intersection count |pred_t AND fg| at t = 0.50 + 0.05 i
///   v[10 + i]             i < 10: union count |pred_t OR fg| at the same t
///   v[kTp]                true positives at 0.5
///   v[kPredPos]           predicted positives at 0.5
///   v[kTruePos]           foreground pixels
///   v[kCorrect]           pixels with (prediction at 0.5) == foreground
///   v[kTotal]             pixels counted
/// Categorical models of K classes (classes() == K >= 2) count a confusion
/// matrix instead (the entries above stay 0):
///   v[kSize + t K + p]    pixels of true class t predicted as class p (argmax of the logits)
/// Counts made for AUC (has_auc(); binary models) end with its histogram:
///   v[auc_offset() + fg kAucThresholds + b]  pixels of foreground fg (0, 1) in
///                         keras.metrics.AUC's bucket b (probability_bucket)
struct MetricCounts {
  static constexpr int kThresholds = 10;  // 0.50, 0.55, ..., 0.95
  static constexpr int kSize = 2 * kThresholds + 5;
  static constexpr int kTp = 2 * kThresholds, kPredPos = kTp + 1, kTruePos = kTp + 2, kCorrect = kTp + 3,
                       kTotal = kTp + 4;
  /// keras.metrics.AUC's default num_thresholds.
  static constexpr int kAucThresholds = 200;
  /// Zero counts of a binary model (classes 0) or of `classes` classes; with
  /// `auc`, also the AUC's histogram.
  explicit MetricCounts(int classes = 0, bool auc = false)
      : v(size_t(kSize) + size_t(classes) * size_t(classes) + (auc ? size_t(2 * kAucThresholds) : 0), 0.0),
        classes_(classes),
        auc_(auc) {}
  std::vector<double> v;

  /// 0 for a binary model, else the number of classes K.
  int classes() const { return classes_; }
  /// Whether the counts hold the AUC's histogram.
  bool has_auc() const { return auc_; }
  /// Element-wise v += o.v; zero counts of another layout take o's (a
  /// default BatchStats). InternalError for two different layouts.
  void add(const MetricCounts& o);
  /// Binary: the mean over the 10 thresholds of I_t / U_t (the foreground IoU
  /// of sigmoid(z) > t, the Kaggle DSB 2018 threshold sweep on pixels); a
  /// threshold with U_t == 0 counts as 1.0: an empty prediction of an empty
  /// mask is perfect. Categorical: keras.metrics.MeanIoU(num_classes=K), the
  /// mean over the classes that occur in the truth or the prediction of
  /// TP / (TP + FP + FN); 0 when nothing was counted.
  double mean_iou() const;
  /// Binary: 2 TP / (pred_pos + true_pos) at threshold 0.5; 1.0 when both are
  /// 0. Categorical: the same per class, averaged over the classes that occur
  /// in the truth or the prediction (the classes mean_iou averages); 0 when
  /// nothing was counted.
  double dice() const;
  /// Categorical: class c's IoU TP / (TP + FP + FN), NaN when c is in neither
  /// the truth nor the prediction (Keras's MeanIoU leaves such a class out).
  double class_iou(int c) const;
  /// correct / total (at threshold 0.5, or the argmax's class); 0 when nothing was counted.
  double accuracy() const;
  /// TP / pred_pos at threshold 0.5 (keras.metrics.Precision); 0 when nothing
  /// is predicted positive, as Keras's divide_no_nan. Binary models only.
  double precision() const;
  /// TP / true_pos at threshold 0.5 (keras.metrics.Recall); 0 without
  /// foreground. Binary models only.
  double recall() const;
  /// The mean of the background's and the foreground's IoU at threshold 0.5,
  /// TN / (TN + FP + FN) and TP / (TP + FP + FN), leaving out a class whose
  /// denominator is 0 (keras.metrics.BinaryIoU(target_class_ids=[0, 1],
  /// threshold=0.5), which is what Keras's MeanIoU(num_classes=2) means on
  /// thresholded binary masks); 0 when nothing was counted. Binary models only.
  double binary_iou() const;
  /// keras.metrics.AUC() with its defaults (num_thresholds=200,
  /// curve="ROC", summation_method="interpolation"): with TP_i, FP_i, TN_i,
  /// FN_i the pixels predicted positive or not at threshold i (probability
  /// above it), recall r_i = TP_i / (TP_i + FN_i) and false-positive rate
  /// f_i = FP_i / (FP_i + TN_i) (0 where the denominator is 0), the
  /// trapezoids sum_i (f_i - f_{i+1}) (r_i + r_{i+1}) / 2. Counts are whole
  /// numbers, so towers and batches add exactly. InternalError without the
  /// histogram (has_auc() false).
  double auc() const;
  /// "mean_iou" | "dice" | "accuracy" | "precision" | "recall" | "binary_iou",
  /// "auc", or Keras's names "binary_accuracy" (accuracy), "binary_io_u"
  /// (binary_iou) and "mean_io_u" (mean_iou of a categorical model);
  /// InternalError otherwise, for the binary ones of a categorical model and
  /// for mean_io_u of a binary one (config validation reports each to the
  /// user).
  double value(const std::string& metric) const;

 private:
  size_t auc_offset() const { return size_t(kSize) + size_t(classes_) * size_t(classes_); }
  int classes_;
  bool auc_;
};

/// Adds the counts of a batch, both tensors on logits.device().
/// Binary counts: logits, targets [N, H, W, 1] (any C: every value is a
/// pixel). The prediction at threshold t is sigmoid(z) > t, evaluated as
/// z > logit(t) (the same in exact arithmetic, one compare per threshold),
/// binned in one pass by the backend's logit_histogram.
/// With counts.has_auc(), the AUC's histogram too (the backend's
/// probability_histogram).
/// Categorical counts (K classes): logits [N, H, W, K], targets [N, H, W, 1]
/// of class indices, counted by the backend's class_confusion.
/// Throws InternalError when the shapes do not match as above.
void accumulate_metrics(const Tensor& logits, const Tensor& targets, MetricCounts& counts);

/// A batch's counts queued on its tower's device by queue_metrics: host
/// arrays a tower keeps from step to step (no allocation once sized), which
/// the device's read-backs fill.
struct QueuedMetrics {
  int classes = 0;                 ///< As MetricCounts::classes() of the counts they are for.
  bool auc = false;                ///< As MetricCounts::has_auc().
  std::vector<int64_t> confusion;  ///< [K, K] from class_confusion (categorical).
  std::vector<int64_t> hist;       ///< [2, kThresholds + 1] from logit_histogram (binary).
  std::vector<int64_t> buckets;    ///< [2, kAucThresholds] from probability_histogram (binary, with AUC).
};

/// Queues what accumulate_metrics would add to counts (the same shapes and
/// errors) into q: the counts are there once the device's read-backs are
/// delivered (DeviceContext::finish_read_backs; at once on a device that
/// does not defer them), for add_metrics.
void queue_metrics(QueuedMetrics& q, const Tensor& logits, const Tensor& targets, const MetricCounts& counts);
/// Adds the delivered counts of q to counts, which have the layout q was
/// queued for (InternalError otherwise).
void add_metrics(const QueuedMetrics& q, MetricCounts& counts);

}  // namespace trainer
