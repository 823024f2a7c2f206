#pragma once
// Text drawing for the data tools' pictures, with OpenCV's Hershey fonts
// (cv::putText): one font everywhere, text cut to fit a width.
#include <opencv2/core.hpp>
#include <string>

namespace trainer::viz {

/// Font size of cv::FONT_HERSHEY_SIMPLEX as a scale factor (0.4: about 9 px
/// capital height, 7 px per character).
struct Font {
  double scale = 0.4;
  int thickness = 1;
};

/// Width and height in pixels of text drawn with font (cv::getTextSize; the
/// height excludes descenders).
cv::Size text_size(const std::string& text, const Font& font);

/// text, or its longest prefix followed by "..." whose width is <= max_width
/// pixels; "" when not even "..." fits.
std::string fit_text(const std::string& text, int max_width, const Font& font);

/// Draws fit_text(text, max_width) with its baseline's left end at origin
/// (anti-aliased), in colour (BGR).
void draw_text(cv::Mat& img, const std::string& text, cv::Point origin, int max_width, const Font& font,
               const cv::Scalar& colour);

/// Draws text rotated 90 degrees counter-clockwise (reading bottom to top, as
/// a y-axis label), centred on centre; img is 8-bit BGR.
void draw_text_vertical(cv::Mat& img, const std::string& text, cv::Point centre, const Font& font,
                        const cv::Scalar& colour);

}  // namespace trainer::viz
