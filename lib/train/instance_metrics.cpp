#include "train/instance_metrics.h"
#include "core/error.h"

#include <cstdint>
#include <unordered_map>

#include <algorithm>
#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <vector>

namespace trainer {

namespace {

// Object index (0..n-1) of every pixel (-1 for background) and n, from a label image.
std::vector<int> object_index(const cv::Mat& labels, int& n) {
  cv::Mat values;
  labels.convertTo(values, CV_32S);
  std::vector<int> flat(values.begin<int>(), values.end<int>());
  std::vector<int> ids;
  for (int v : flat)
    if (v != 0) ids.push_back(v);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  n = int(ids.size());
  for (int& v : flat) v = v == 0 ? -1 : int(std::lower_bound(ids.begin(), ids.end(), v) - ids.begin());
  return flat;
}

void check(const cv::Mat& m, const char* what) {
  if (m.channels() != 1 || (m.depth() != CV_16U && m.depth() != CV_32S))
    throw InternalError(std::string("instance_score: ") + what + " must be CV_16UC1 or CV_32SC1");
}

}  // namespace

InstanceScore instance_score(const cv::Mat& truth, const cv::Mat& pred) {
  check(truth, "truth");
  check(pred, "pred");
  if (truth.size() != pred.size()) throw InternalError("instance_score: truth and pred sizes differ");
  InstanceScore s;
  const std::vector<int> t = object_index(truth, s.n_true), p = object_index(pred, s.n_pred);
  // Pixel counts: each object's area, and the intersections of the (true,
  // predicted) pairs that overlap at all (sparse: a noisy prediction with many
  // components must not cost n_true * n_pred memory).
  std::vector<long> area_t(size_t(s.n_true), 0), area_p(size_t(s.n_pred), 0);
  std::unordered_map<uint64_t, long> inter;
  for (size_t k = 0; k < t.size(); ++k) {
    if (t[k] >= 0) ++area_t[size_t(t[k])];
    if (p[k] >= 0) ++area_p[size_t(p[k])];
    if (t[k] >= 0 && p[k] >= 0) ++inter[uint64_t(t[k]) << 32 | uint64_t(p[k])];
  }
  // Best IoU of each true object over the predictions.
  std::vector<double> best(size_t(s.n_true), 0.0);
  for (const auto& [pair, in] : inter) {
    const size_t i = size_t(pair >> 32), j = size_t(pair & 0xFFFFFFFFu);
    best[i] = std::max(best[i], double(in) / double(area_t[i] + area_p[j] - in));
  }
  double sum = 0;
  for (int k = 0; k < kInstanceThresholds; ++k) {
    const double th = instance_threshold(k);
    const int tp = int(std::count_if(best.begin(), best.end(), [th](double iou) { return iou > th; }));
    const int fp = s.n_pred - tp, fn = s.n_true - tp;
    s.precision[size_t(k)] = tp + fp + fn == 0 ? 1.0 : double(tp) / double(tp + fp + fn);
    sum += s.precision[size_t(k)];
  }
  s.score = sum / kInstanceThresholds;
  return s;
}

cv::Mat connected_objects(const cv::Mat& binary) {
  if (binary.type() != CV_8UC1) throw InternalError("connected_objects: binary must be CV_8UC1");
  cv::Mat labels;
  cv::connectedComponents(binary != 0, labels, 8, CV_32S);
  return labels;
}

}  // namespace trainer
