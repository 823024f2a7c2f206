#include "data/boundary_objects.h"

#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <vector>

#include "core/error.h"
#include "data/boundary_classes.h"

namespace trainer {

cv::Mat boundary_objects(const cv::Mat& classes) {
  if (classes.type() != CV_8UC1) throw InternalError("boundary_objects: classes must be CV_8UC1");
  cv::Mat objects;
  cv::connectedComponents(classes == kInterior, objects, 8, CV_32S);
  // Breadth first from every seed pixel at once, in raster order: a boundary pixel takes the label of the first
  // labelled neighbour to reach it, which is one of the fewest steps away.
  std::vector<cv::Point> frontier, next;
  for (int y = 0; y < objects.rows; ++y)
    for (int x = 0; x < objects.cols; ++x)
      if (objects.at<int>(y, x) > 0) frontier.emplace_back(x, y);
  while (!frontier.empty()) {
    next.clear();
    for (const cv::Point& p : frontier) {
      const int label = objects.at<int>(p);
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          const cv::Point q(p.x + dx, p.y + dy);
          if (q.x < 0 || q.y < 0 || q.x >= objects.cols || q.y >= objects.rows) continue;
          if (classes.at<uint8_t>(q) != kBoundary || objects.at<int>(q) != 0) continue;
          objects.at<int>(q) = label;
          next.push_back(q);
        }
    }
    frontier.swap(next);
  }
  return objects;
}

}  // namespace trainer
