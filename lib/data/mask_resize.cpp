#include "data/mask_resize.h"

#include <vector>

#include <opencv2/imgproc.hpp>

namespace trainer {

cv::Mat resize_mask(const cv::Mat& mask, cv::Size size) {
  if (mask.size() == size) return mask;
  // The values present, lowest first.
  std::vector<char> present(mask.depth() == CV_16U ? 65536 : 256, 0);
  for (int r = 0; r < mask.rows; ++r)
    for (int c = 0; c < mask.cols; ++c)
      present[mask.depth() == CV_16U ? mask.at<uint16_t>(r, c) : mask.at<uint8_t>(r, c)] = 1;
  cv::Mat out(size, mask.type(), cv::Scalar(0)), best(size, CV_32F, cv::Scalar(-1)), plane, share;
  for (int v = 0; v < int(present.size()); ++v) {
    if (!present[size_t(v)]) continue;
    cv::Mat(mask == v).convertTo(plane, CV_32F, 1.0 / 255);
    cv::resize(plane, share, size, 0, 0, cv::INTER_AREA);
    const cv::Mat larger = share > best;  // strictly: a tie keeps the lower value
    share.copyTo(best, larger);
    out.setTo(v, larger);
  }
  return out;
}

}  // namespace trainer
