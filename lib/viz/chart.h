#pragma once
// A line chart drawn with OpenCV into one panel of a picture: axes with
// "nice" ticks (steps of 1, 2 or 5 times a power of ten), grid lines, axis
// labels, a title and a legend to the right of the plot area.
#include <opencv2/core.hpp>
#include <string>
#include <vector>

namespace trainer::viz {

/// One line: points (xs[i], ys[i]); a non-finite y is a gap (the line breaks there).
struct Series {
  std::string name;     ///< Legend text.
  cv::Scalar colour;    ///< BGR.
  bool dashed = false;  ///< Dashed (8 px on, 5 px off) instead of solid.
  std::vector<double> xs, ys;
};

struct Chart {
  std::string title, x_label, y_label;
  bool integer_x = false;  ///< x ticks at whole numbers only (epochs).
  std::vector<Series> series;
  std::string empty_note;  ///< Shown in the plot area when no series has a finite point.
};

/// Margins of the plot area inside a panel, in pixels.
constexpr int kChartLeft = 72, kChartRight = 170, kChartTop = 34, kChartBottom = 52;

/// Draws chart into panel (8-bit BGR, at least 320 x 200 pixels; the panel's
/// pixels are overwritten with a white background). The axes span the points
/// of magnitude below 1e300 (others, NaN and infinities included, are left
/// out, breaking the line) with 5% padding (x padded by half a unit when integer_x); a range
/// of one value is widened to +-5% of it (or +-0.05 around 0).
/// Throws InternalError for a smaller panel or xs/ys of unequal size.
void draw_chart(cv::Mat& panel, const Chart& chart);

/// Tick positions inside [lo, hi]: the multiples of a step of 1, 2 or 5 times
/// a power of ten (at least 1 when integer), the "nice number" nearest to
/// (hi - lo) / (target - 1) (Heckbert, "Nice numbers for graph labels",
/// Graphics Gems, 1990).
/// Requires lo < hi, both finite.
std::vector<double> nice_ticks(double lo, double hi, int target, bool integer);

/// Colour i of the 10-colour "tab10" palette (matplotlib's default cycle), BGR; i wraps.
cv::Scalar palette(int i);

}  // namespace trainer::viz
