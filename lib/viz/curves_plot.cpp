#include "viz/curves_plot.h"

#include <algorithm>

#include "viz/chart.h"
#include "viz/text.h"

namespace trainer::viz {

namespace {

// The chart of the given columns of log: "x" and "val_x" share a colour, val_ dashed.
Chart make_chart(const TrainingLog& log, const std::vector<size_t>& columns, const std::string& title,
                 const std::string& y_label) {
  Chart chart;
  chart.title = title;
  chart.x_label = "epoch";
  chart.y_label = y_label;
  chart.integer_x = true;
  chart.empty_note = "no " + y_label + " columns in the log";
  std::vector<std::string> bases;  // colour i belongs to bases[i]
  struct Entry {
    size_t base;
    bool val;
    size_t column;
  };
  std::vector<Entry> entries;
  for (size_t k : columns) {
    const std::string& name = log.columns[k];
    const bool val = name.rfind("val_", 0) == 0 && name.size() > 4;
    const std::string base = val ? name.substr(4) : name;
    const size_t i = size_t(std::find(bases.begin(), bases.end(), base) - bases.begin());
    if (i == bases.size()) bases.push_back(base);
    entries.push_back({i, val, k});
  }
  // Legend order: each base's train line, then its val_ line.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::make_pair(a.base, a.val) < std::make_pair(b.base, b.val);
  });
  for (const Entry& e : entries) {
    Series s;
    s.name = log.columns[e.column];
    s.colour = palette(int(e.base));
    s.dashed = e.val;
    for (double epoch : log.epochs) s.xs.push_back(epoch + 1);
    s.ys = log.values[e.column];
    chart.series.push_back(std::move(s));
  }
  return chart;
}

}  // namespace

cv::Mat plot_training_curves(const TrainingLog& log, const std::string& title) {
  std::vector<size_t> losses, metrics;
  for (size_t k = 0; k < log.columns.size(); ++k) {
    if (log.columns[k] == "learning_rate") continue;  // ReduceLROnPlateau's: not on the 0..1 metric scale
    (log.columns[k] == "loss" || log.columns[k] == "val_loss" ? losses : metrics).push_back(k);
  }

  cv::Mat img(kCurvesHeight, kCurvesWidth, CV_8UC3, cv::Scalar(255, 255, 255));
  const Font title_font{0.6, 1};
  const int w = text_size(title, title_font).width;
  draw_text(img, title, {std::max(8, (kCurvesWidth - w) / 2), 24}, kCurvesWidth - 16, title_font,
            cv::Scalar(30, 30, 30));
  cv::Mat left = img(cv::Rect(0, kCurvesTitleHeight, kCurvesPanelWidth, kCurvesPanelHeight));
  cv::Mat right = img(cv::Rect(kCurvesPanelWidth, kCurvesTitleHeight, kCurvesPanelWidth, kCurvesPanelHeight));
  draw_chart(left, make_chart(log, losses, "Loss", "loss"));
  draw_chart(right, make_chart(log, metrics, "Metrics", "metric"));
  return img;
}

}  // namespace trainer::viz
