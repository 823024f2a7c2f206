#include "data/instances.h"

#include <opencv2/imgproc.hpp>

#include <queue>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace trainer {

namespace {

/// The morphological reconstruction by dilation of marker under mask (both CV_32FC1, marker <= mask): marker
/// dilated by 3x3 and capped by mask until it stops changing.
cv::Mat reconstruct(cv::Mat marker, const cv::Mat& mask) {
  const cv::Mat kernel = cv::Mat::ones(3, 3, CV_8U);
  cv::Mat next;
  for (;;) {
    cv::dilate(marker, next, kernel);
    cv::min(next, mask, next);
    if (cv::norm(next, marker, cv::NORM_INF) == 0) return marker;
    std::swap(marker, next);
  }
}

/// The markers of one component (own: CV_8UC1 0/255) with distance map dist: the regional maxima of dist's
/// h-maxima reconstruction, 8-connected components labelled 1..m (CV_32SC1). Returns m.
int h_maxima_markers(const cv::Mat& dist, const cv::Mat& own, double h, cv::Mat& markers) {
  cv::Mat lowered;
  cv::max(dist - h, 0.0, lowered);
  const cv::Mat rec = reconstruct(lowered, dist);
  // Regional maxima of rec: where it stands above its own reconstruction from one step lower.
  constexpr double kStep = 1e-3;
  cv::Mat below;
  cv::max(rec - kStep, 0.0, below);
  const cv::Mat tops = ((rec - reconstruct(below, rec)) > kStep / 2) & own;
  return cv::connectedComponents(tops, markers, 8, CV_32S) - 1;
}

/// Floods own (CV_8UC1) from markers (CV_32SC1, 0 unlabelled) down dist (CV_32FC1): the pixel of highest distance
/// first, ties in the order they were reached; each joins the label of the pixel that reached it.
void flood(const cv::Mat& dist, const cv::Mat& own, cv::Mat& markers) {
  using Entry = std::tuple<float, long long, int, int>;  // distance, -order, y, x: the largest first
  std::priority_queue<Entry> queue;
  long long order = 0;
  for (int y = 0; y < markers.rows; ++y)
    for (int x = 0; x < markers.cols; ++x)
      if (markers.at<int>(y, x) > 0) queue.emplace(dist.at<float>(y, x), -order++, y, x);
  while (!queue.empty()) {
    const auto [d, o, y, x] = queue.top();
    queue.pop();
    const int label = markers.at<int>(y, x);
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        const int v = y + dy, u = x + dx;
        if (v < 0 || u < 0 || v >= own.rows || u >= own.cols || !own.at<uint8_t>(v, u) || markers.at<int>(v, u))
          continue;
        markers.at<int>(v, u) = label;
        queue.emplace(dist.at<float>(v, u), -order++, v, u);
      }
  }
}

/// labels renumbered 1..N in raster order of each label's first pixel (0 stays 0).
void renumber(cv::Mat& labels) {
  std::unordered_map<int, int> to;
  for (int y = 0; y < labels.rows; ++y) {
    int* l = labels.ptr<int>(y);
    for (int x = 0; x < labels.cols; ++x)
      if (l[x]) l[x] = to.emplace(l[x], int(to.size()) + 1).first->second;
  }
}

}  // namespace

cv::Mat split_instances(const cv::Mat& foreground, const InstanceSplit& s) {
  if (foreground.type() != CV_8UC1) throw InternalError("split_instances: foreground must be CV_8UC1");
  cv::Mat components, stats, centroids;
  const int n = cv::connectedComponentsWithStats(foreground != 0, components, stats, centroids, 8, CV_32S);
  cv::Mat labels = cv::Mat::zeros(foreground.size(), CV_32SC1);
  int next = 1;
  for (int c = 1; c < n; ++c) {
    // The component's box and a pixel of background around it, for its distances.
    const cv::Rect box = cv::Rect(stats.at<int>(c, cv::CC_STAT_LEFT) - 1, stats.at<int>(c, cv::CC_STAT_TOP) - 1,
                                  stats.at<int>(c, cv::CC_STAT_WIDTH) + 2, stats.at<int>(c, cv::CC_STAT_HEIGHT) + 2) &
                         cv::Rect(cv::Point(0, 0), foreground.size());
    const cv::Mat own = components(box) == c;
    cv::Mat out = labels(box);
    if (s.min_depth <= 0) {
      out.setTo(next++, own);
      continue;
    }
    cv::Mat dist, markers;
    cv::distanceTransform(own, dist, cv::DIST_L2, cv::DIST_MASK_PRECISE);
    const int m = h_maxima_markers(dist, own, s.min_depth, markers);
    if (m <= 1) {
      out.setTo(next++, own);
      continue;
    }
    flood(dist, own, markers);
    cv::Mat shifted = markers + (next - 1);
    shifted.copyTo(out, own);
    next += m;
  }
  renumber(labels);
  return labels;
}

}  // namespace trainer
