#include "viz/text.h"

#include <opencv2/imgproc.hpp>

namespace trainer::viz {

cv::Size text_size(const std::string& text, const Font& font) {
  int baseline = 0;
  return cv::getTextSize(text, cv::FONT_HERSHEY_SIMPLEX, font.scale, font.thickness, &baseline);
}

std::string fit_text(const std::string& text, int max_width, const Font& font) {
  if (text_size(text, font).width <= max_width) return text;
  for (size_t n = text.size(); n-- > 0;) {
    std::string cut = text.substr(0, n) + "...";
    if (text_size(cut, font).width <= max_width) return cut;
  }
  return "";
}

void draw_text(cv::Mat& img, const std::string& text, cv::Point origin, int max_width, const Font& font,
               const cv::Scalar& colour) {
  cv::putText(img, fit_text(text, max_width, font), origin, cv::FONT_HERSHEY_SIMPLEX, font.scale, colour,
              font.thickness, cv::LINE_AA);
}

void draw_text_vertical(cv::Mat& img, const std::string& text, cv::Point centre, const Font& font,
                        const cv::Scalar& colour) {
  const cv::Size size = text_size(text, font);
  const int pad = 4;  // room for descenders
  // Draw horizontally on a copy of the destination area (rotated back), so the
  // background shows through, then rotate the strip into place.
  const int w = size.width + 2 * pad, h = size.height + 2 * pad;
  const cv::Rect dest(centre.x - h / 2, centre.y - w / 2, h, w);
  const cv::Rect clipped = dest & cv::Rect(0, 0, img.cols, img.rows);
  if (clipped != dest) return;  // no room: the label is left out rather than cut
  cv::Mat strip;
  cv::rotate(img(dest), strip, cv::ROTATE_90_CLOCKWISE);
  cv::putText(strip, text, cv::Point(pad, pad + size.height), cv::FONT_HERSHEY_SIMPLEX, font.scale, colour,
              font.thickness, cv::LINE_AA);
  cv::Mat back;
  cv::rotate(strip, back, cv::ROTATE_90_COUNTERCLOCKWISE);
  back.copyTo(img(dest));
}

}  // namespace trainer::viz
