#include "data/instances.h"

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace trainer {

namespace {

/// The 8 neighbours of pixel (y, x) of a rows x cols grid, as offsets; f(v, u) for each inside it.
template <class F>
void for_neighbours(int y, int x, int rows, int cols, F f) {
  for (int dy = -1; dy <= 1; ++dy)
    for (int dx = -1; dx <= 1; ++dx) {
      const int v = y + dy, u = x + dx;
      if ((dy || dx) && v >= 0 && u >= 0 && v < rows && u < cols) f(v, u);
    }
}

/// The h-maxima of dist over own (CV_8UC1), one marker pixel each, labelled 1..m in markers (CV_32SC1). The
/// pixels are added from the highest distance down, joined into 8-connected regions by union-find; where two
/// regions meet at a saddle of distance d, the one of the lower peak p (on equal peaks, the later found) ends,
/// and its peak is a marker when p - d >= h. The last region's peak is one too. Returns m.
int h_maxima_markers(const cv::Mat& dist, const cv::Mat& own, double h, cv::Mat& markers) {
  const int rows = dist.rows, cols = dist.cols;
  std::vector<int> order;
  for (int i = 0; i < rows * cols; ++i)
    if (own.data[i]) order.push_back(i);
  const float* d = dist.ptr<float>();
  std::stable_sort(order.begin(), order.end(), [d](int a, int b) { return d[a] > d[b]; });
  std::vector<int> parent(size_t(rows) * size_t(cols), -1), peak(parent.size(), -1);  // peak: a root's top pixel
  const auto root = [&](int i) {
    while (parent[size_t(i)] != i) i = parent[size_t(i)] = parent[size_t(parent[size_t(i)])];
    return i;
  };
  markers = cv::Mat::zeros(dist.size(), CV_32SC1);
  int m = 0;
  for (int i : order) {
    parent[size_t(i)] = i;
    peak[size_t(i)] = i;
    for_neighbours(i / cols, i % cols, rows, cols, [&](int v, int u) {
      const int j = v * cols + u;
      if (parent[size_t(j)] < 0) return;  // not reached yet
      int a = root(i), b = root(j);
      if (a == b) return;
      // a keeps the higher peak (the earlier found on a tie); b ends at this saddle.
      if (d[peak[size_t(b)]] > d[peak[size_t(a)]] ||
          (d[peak[size_t(b)]] == d[peak[size_t(a)]] && peak[size_t(b)] < peak[size_t(a)]))
        std::swap(a, b);
      if (d[peak[size_t(b)]] - d[i] >= h) markers.at<int>(peak[size_t(b)] / cols, peak[size_t(b)] % cols) = ++m;
      parent[size_t(b)] = a;
    });
  }
  if (!order.empty()) {
    const int top = peak[size_t(root(order.front()))];
    markers.at<int>(top / cols, top % cols) = ++m;
  }
  return m;
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
    for_neighbours(y, x, own.rows, own.cols, [&](int v, int u) {
      if (!own.at<uint8_t>(v, u) || markers.at<int>(v, u)) return;
      markers.at<int>(v, u) = label;
      queue.emplace(dist.at<float>(v, u), -order++, v, u);
    });
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
