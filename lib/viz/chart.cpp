#include "viz/chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

#include "core/error.h"
#include "viz/text.h"

namespace trainer::viz {

namespace {

const cv::Scalar kWhite(255, 255, 255), kAxis(60, 60, 60), kGrid(225, 225, 225), kText(30, 30, 30);
const Font kTickFont{0.4, 1}, kLabelFont{0.45, 1}, kTitleFont{0.55, 1};
constexpr double kDashOn = 8, kDashOff = 5;

// Heckbert's rounded nice number: 1, 2, 5 or 10 times a power of ten nearest x.
double nice_number(double x) {
  const double e = std::floor(std::log10(x));
  const double f = x / std::pow(10.0, e);
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * std::pow(10.0, e);
}

// The tick label of v for ticks `step` apart: as many decimals as the step needs.
std::string tick_label(double v, double step) {
  const int decimals = std::clamp(int(-std::floor(std::log10(step) + 1e-9)), 0, 8);
  if (std::abs(v) < step * 1e-6) v = 0;  // no "-0.00"
  char buf[64];
  if (std::abs(v) >= 1e7)
    std::snprintf(buf, sizeof buf, "%.3g", v);
  else
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
  // Padded by fraction of the span (or widened around a single value).
  Range padded(double fraction, double minimum_half_width) const {
    Range r = *this;
    const double span = hi - lo;
    if (span > 0) {
      r.lo -= span * fraction;
      r.hi += span * fraction;
    } else {
      const double half = std::max(std::abs(lo) * 0.05, minimum_half_width);
      r.lo -= half;
      r.hi += half;
    }
    return r;
  }
};

// Draws a polyline solid or dashed; the dash pattern continues across segments.
void draw_polyline(cv::Mat& img, const std::vector<cv::Point2d>& pts, const cv::Scalar& colour, bool dashed) {
  constexpr int kThickness = 2;
  double phase = 0;  // distance along the current dash period
  for (size_t i = 1; i < pts.size(); ++i) {
    const cv::Point2d a = pts[i - 1], b = pts[i];
    if (!dashed) {
      cv::line(img, a, b, colour, kThickness, cv::LINE_AA);
      continue;
    }
    const double len = cv::norm(b - a);
    double t = 0;
    while (t < len) {
      const bool on = phase < kDashOn;
      const double left = on ? kDashOn - phase : kDashOn + kDashOff - phase;
      const double step = std::min(left, len - t);
      if (on) cv::line(img, a + (b - a) * (t / len), a + (b - a) * ((t + step) / len), colour, kThickness, cv::LINE_AA);
      t += step;
      phase = std::fmod(phase + step, kDashOn + kDashOff);
    }
  }
}

}  // namespace

cv::Scalar palette(int i) {
  static const cv::Scalar kTab10[10] = {{180, 119, 31}, {14, 127, 255}, {44, 160, 44},  {40, 39, 214},
                                        {189, 103, 148}, {75, 86, 140}, {194, 119, 227}, {127, 127, 127},
                                        {34, 189, 188}, {207, 190, 23}};
  return kTab10[((i % 10) + 10) % 10];
}

std::vector<double> nice_ticks(double lo, double hi, int target, bool integer) {
  if (!(lo < hi) || !std::isfinite(lo) || !std::isfinite(hi) || target < 2)
    throw InternalError("nice_ticks: needs finite lo < hi and target >= 2");
  // A range only a few ulps wide would give a step too small to count with:
  // widen it to a relative 1e-9 first, and never draw more than 4 * target ticks.
  const double min_span = std::max(std::abs(lo), std::abs(hi)) * 1e-9;
  if (hi - lo < min_span) lo -= min_span, hi += min_span;
  double step = nice_number((hi - lo) / (target - 1));
  if (integer) step = std::max(step, 1.0);
  std::vector<double> ticks;
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9 && int(ticks.size()) < 4 * target; k += 1)
    ticks.push_back(k * step);
  return ticks;
}

namespace {

// A value whose range with others stays finite (hi - lo of +-1e308 overflows).
bool drawable(double v) { return std::abs(v) < 1e300; }

}  // namespace

void draw_chart(cv::Mat& panel, const Chart& chart) {
  if (panel.type() != CV_8UC3 || panel.cols < 320 || panel.rows < 200)
    throw InternalError("draw_chart: the panel must be 8-bit BGR and at least 320 x 200");
  panel.setTo(kWhite);
  const cv::Rect area(kChartLeft, kChartTop, panel.cols - kChartLeft - kChartRight,
                      panel.rows - kChartTop - kChartBottom);

  const cv::Size title = text_size(chart.title, kTitleFont);
  draw_text(panel, chart.title, {area.x + std::max(0, (area.width - title.width) / 2), kChartTop - 12},
            panel.cols - area.x, kTitleFont, kText);

  Range xr, yr;
  for (const Series& s : chart.series) {
    if (s.xs.size() != s.ys.size()) throw InternalError("draw_chart: series '" + s.name + "' xs/ys sizes differ");
    for (size_t i = 0; i < s.xs.size(); ++i)
      if (drawable(s.xs[i]) && drawable(s.ys[i])) {
        xr.add(s.xs[i]);
        yr.add(s.ys[i]);
      }
  }
  cv::rectangle(panel, area, kAxis, 1);
  if (xr.empty()) {
    const cv::Size note = text_size(chart.empty_note, kLabelFont);
    draw_text(panel, chart.empty_note, {area.x + std::max(4, (area.width - note.width) / 2), area.y + area.height / 2},
              area.width - 8, kLabelFont, kText);
    return;
  }
  xr = chart.integer_x && xr.lo == xr.hi ? Range{xr.lo - 0.5, xr.hi + 0.5}
                                         : xr.padded(0.03, chart.integer_x ? 0.5 : 0.05);
  yr = yr.padded(0.05, 0.05);
  auto px = [&](double x) { return area.x + (x - xr.lo) / (xr.hi - xr.lo) * area.width; };
  auto py = [&](double y) { return area.y + area.height - (y - yr.lo) / (yr.hi - yr.lo) * area.height; };

  // Grid, ticks and tick labels.
  const std::vector<double> xt = nice_ticks(xr.lo, xr.hi, 8, chart.integer_x);
  const std::vector<double> yt = nice_ticks(yr.lo, yr.hi, 6, false);
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double x : xt) {
    const int X = int(std::lround(px(x)));
    cv::line(panel, {X, area.y + 1}, {X, area.br().y - 2}, kGrid, 1);
    cv::line(panel, {X, area.br().y}, {X, area.br().y + 4}, kAxis, 1);
    const std::string label = tick_label(x, xstep);
    draw_text(panel, label, {X - text_size(label, kTickFont).width / 2, area.br().y + 18}, 80, kTickFont, kText);
  }
  for (double y : yt) {
    const int Y = int(std::lround(py(y)));
    cv::line(panel, {area.x + 1, Y}, {area.br().x - 2, Y}, kGrid, 1);
    cv::line(panel, {area.x - 4, Y}, {area.x, Y}, kAxis, 1);
    const std::string label = tick_label(y, ystep);
    const int w = text_size(label, kTickFont).width;
    draw_text(panel, label, {std::max(2, area.x - 7 - w), Y + 4}, area.x - 8, kTickFont, kText);
  }
  cv::rectangle(panel, area, kAxis, 1);
  const cv::Size xl = text_size(chart.x_label, kLabelFont);
  draw_text(panel, chart.x_label, {area.x + (area.width - xl.width) / 2, area.br().y + 40}, area.width, kLabelFont,
            kText);
  draw_text_vertical(panel, chart.y_label, {14, area.y + area.height / 2}, kLabelFont, kText);

  // Lines (broken at gaps) with a dot at every point, clipped to the plot area.
  cv::Mat plot = panel(area);
  for (const Series& s : chart.series) {
    std::vector<cv::Point2d> run;
    auto flush = [&] {
      draw_polyline(plot, run, s.colour, s.dashed);
      run.clear();
    };
    for (size_t i = 0; i < s.xs.size(); ++i) {
      if (!drawable(s.xs[i]) || !drawable(s.ys[i])) {
        flush();
        continue;
      }
      const cv::Point2d p(px(s.xs[i]) - area.x, py(s.ys[i]) - area.y);
      run.push_back(p);
      cv::circle(plot, p, 3, s.colour, cv::FILLED, cv::LINE_AA);
    }
    flush();
  }

  // Legend, to the right of the plot area.
  int y = area.y + 10;
  for (const Series& s : chart.series) {
    const int x0 = area.br().x + 10;
    draw_polyline(panel, {cv::Point2d(x0, y), cv::Point2d(x0 + 28, y)}, s.colour, s.dashed);
    draw_text(panel, s.name, {x0 + 34, y + 4}, panel.cols - x0 - 36, kTickFont, kText);
    y += 18;
  }
}

}  // namespace trainer::viz
