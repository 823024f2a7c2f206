#include "viz/overlay.h"
#include "core/error.h"

#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <vector>

namespace trainer::viz {

void overlay_mask(cv::Mat& image, const cv::Mat& mask, const cv::Scalar& colour) {
  if (image.type() != CV_8UC3 || mask.type() != CV_8UC1 || image.size() != mask.size())
    throw InternalError("overlay_mask: needs an 8-bit BGR image and an 8-bit mask of its size");
  const cv::Mat on = mask != 0;
  cv::Mat blended;
  cv::addWeighted(image, 1.0 - kOverlayAlpha, cv::Mat(image.size(), CV_8UC3, colour), kOverlayAlpha, 0.0, blended);
  blended.copyTo(image, on);
  std::vector<std::vector<cv::Point>> contours;
  cv::findContours(on, contours, cv::RETR_LIST, cv::CHAIN_APPROX_NONE);
  cv::drawContours(image, contours, -1, colour, 1, cv::LINE_8);
}

}  // namespace trainer::viz
