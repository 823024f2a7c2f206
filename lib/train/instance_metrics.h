#pragma once
// The instance metric of the 2018 Data Science Bowl (Kaggle): mean over IoU
// thresholds of TP / (TP + FP + FN) between predicted and true objects.
// Source: https://www.kaggle.com/c/data-science-bowl-2018/overview/evaluation
#include <array>
#include <opencv2/core.hpp>

namespace trainer {

/// The thresholds t = 0.50, 0.55, ..., 0.95.
constexpr int kInstanceThresholds = 10;
inline double instance_threshold(int i) { return (50 + 5 * i) / 100.0; }  // nearest double to the decimal

/// The score of one image.
struct InstanceScore {
  int n_true = 0;                                      ///< Objects in the truth.
  int n_pred = 0;                                      ///< Objects in the prediction.
  std::array<double, kInstanceThresholds> precision{}; ///< TP / (TP + FP + FN) at instance_threshold(i).
  double score = 0;                                    ///< Mean of precision.
};

/// Scores a predicted label image against a true one. truth, pred: [H, W]
/// single-channel CV_16U or CV_32S of the same size; 0 is background, every
/// other value is one object (values need not be consecutive; an object may be
/// split into several pieces). IoU(a, b) = |a AND b| / |a OR b| in pixels. At
/// threshold t a true object is a true positive when a predicted object has
/// IoU > t with it; since t >= 0.5, each object matches at most one other (two
/// objects with IoU > 0.5 against the same object would have to overlap each
/// other). FP = predicted objects matched by none, FN = true objects matched by
/// none. An image with neither true nor predicted objects scores precision 1 at
/// every t (nothing to find, nothing found wrongly); the Kaggle text leaves that
/// case open. Throws InternalError for other types, channel counts or
/// differing sizes.
InstanceScore instance_score(const cv::Mat& truth, const cv::Mat& pred);

/// Objects of a binary image: the 8-connected components of binary != 0
/// (cv::connectedComponents), CV_32S [H, W], 0 background, 1..N. binary: CV_8U [H, W].
cv::Mat connected_objects(const cv::Mat& binary);

}  // namespace trainer
