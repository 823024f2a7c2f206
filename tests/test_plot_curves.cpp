// Tests of data_tools/plot_curves and lib/viz (training_log, chart,
// curves_plot): a log written here is drawn into both panels at the
// documented size; bad logs exit with 2 and a message naming the line.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <sstream>

#include "core/error.h"
#include "process_testing.h"
#include "viz/chart.h"
#include "viz/curves_plot.h"
#include "train/training_log.h"

namespace {

namespace fs = std::filesystem;
using namespace trainer::testing;

Run plot_curves(const std::string& args, const fs::path& dir) { return run(PLOT_CURVES_BINARY, args, dir); }

// A Keras CSVLogger log of `epochs` epochs: losses falling, metrics rising.
std::string keras_log(int epochs) {
  std::ostringstream s;
  s << "epoch,accuracy,dice,loss,mean_iou,val_accuracy,val_dice,val_loss,val_mean_iou\n";
  for (int e = 0; e < epochs; ++e) {
    const double t = double(e) / (epochs - 1);
    s << e << "," << 0.8 + 0.15 * t << "," << 0.3 + 0.5 * t << "," << 0.7 - 0.5 * t << "," << 0.2 + 0.5 * t << ","
      << 0.78 + 0.12 * t << "," << 0.28 + 0.4 * t << "," << 0.72 - 0.4 * t << "," << 0.18 + 0.4 * t << "\n";
  }
  return s.str();
}

// Pixels of img inside r that are clearly coloured (not grey, white or black): the plotted lines.
std::vector<cv::Point> coloured_pixels(const cv::Mat& img, const cv::Rect& r) {
  std::vector<cv::Point> pts;
  for (int y = r.y; y < r.br().y; ++y)
    for (int x = r.x; x < r.br().x; ++x) {
      const cv::Vec3b p = img.at<cv::Vec3b>(y, x);
      const int hi = std::max({p[0], p[1], p[2]}), lo = std::min({p[0], p[1], p[2]});
      if (hi - lo > 60) pts.push_back({x, y});
    }
  return pts;
}

// Mean row of the points whose column is in [x0, x1).
double mean_row(const std::vector<cv::Point>& pts, int x0, int x1) {
  double sum = 0;
  int n = 0;
  for (const auto& p : pts)
    if (p.x >= x0 && p.x < x1) {
      sum += p.y;
      ++n;
    }
  REQUIRE(n > 0);
  return sum / n;
}

}  // namespace

TEST_CASE("plot_curves draws losses left and metrics right at the documented size", "[plot]") {
  TempDir dir("test_plot");
  std::ofstream(dir.root / "log.csv") << keras_log(12);
  const Run r = plot_curves("--log " + (dir.root / "log.csv").string() + " --output " + (dir.root / "c.png").string(),
                            dir.root);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const cv::Mat img = cv::imread((dir.root / "c.png").string(), cv::IMREAD_COLOR);
  REQUIRE(img.cols == 1280);  // data_tools/README.md
  REQUIRE(img.rows == 516);
  REQUIRE(img.cols == trainer::viz::kCurvesWidth);
  REQUIRE(img.rows == trainer::viz::kCurvesHeight);

  using namespace trainer::viz;
  const int top = kCurvesTitleHeight + kChartTop, h = kCurvesPanelHeight - kChartTop - kChartBottom;
  const int w = kCurvesPanelWidth - kChartLeft - kChartRight;
  const cv::Rect left_area(kChartLeft, top, w, h), right_area(kCurvesPanelWidth + kChartLeft, top, w, h);
  const std::vector<cv::Point> left = coloured_pixels(img, left_area), right = coloured_pixels(img, right_area);
  CHECK(left.size() > 300);
  CHECK(right.size() > 4 * 300);  // four metrics, eight lines
  // The loss falls: its pixels sit high on the left and low on the right;
  // the metrics rise: the other way round.
  CHECK(mean_row(left, left_area.x, left_area.x + w / 10) < mean_row(left, left_area.br().x - w / 10, left_area.br().x));
  CHECK(mean_row(right, right_area.x, right_area.x + w / 10) >
        mean_row(right, right_area.br().x - w / 10, right_area.br().x));
  // Only loss columns on the left: the metrics' colours (tab10's 2nd..4th) are absent there.
  const cv::Scalar orange = palette(1);
  int orange_left = 0, orange_right = 0;
  for (const auto& p : left) orange_left += cv::norm(cv::Vec3d(img.at<cv::Vec3b>(p)) - cv::Vec3d(orange[0], orange[1], orange[2])) < 30;
  for (const auto& p : right) orange_right += cv::norm(cv::Vec3d(img.at<cv::Vec3b>(p)) - cv::Vec3d(orange[0], orange[1], orange[2])) < 30;
  CHECK(orange_left == 0);
  CHECK(orange_right > 100);
  for (const auto& e : fs::directory_iterator(dir.root)) CHECK(e.path().string().find(".tmp-") == std::string::npos);
}

TEST_CASE("plot_curves: a log with one epoch and a log without metrics still draw", "[plot]") {
  TempDir dir("test_plot");
  std::ofstream(dir.root / "one.csv") << "epoch,loss,mean_iou,val_loss,val_mean_iou\n0,0.5,0.3,0.6,0.2\n";
  std::ofstream(dir.root / "loss_only.csv") << "epoch,loss\r\n0,0.9\r\n1,0.7\r\n\r\n2,0.6\r\n";
  // From fuzzing: +-1e308 overflowed the axis range into an internal error.
  std::ofstream(dir.root / "huge.csv") << "epoch,loss\n0,1e308\n1,-1e308\n2,0.5\n3,inf\n";
  for (const char* name : {"one", "loss_only", "huge"}) {
    const Run r = plot_curves("--log " + (dir.root / (std::string(name) + ".csv")).string() + " -o " +
                                  (dir.root / (std::string(name) + ".png")).string(),
                              dir.root);
    INFO(name << ": " << r.err);
    REQUIRE(r.code == 0);
    const cv::Mat img = cv::imread((dir.root / (std::string(name) + ".png")).string(), cv::IMREAD_COLOR);
    REQUIRE(img.size() == cv::Size(trainer::viz::kCurvesWidth, trainer::viz::kCurvesHeight));
  }
}

TEST_CASE("read_training_log: NA and empty fields are gaps, CRLF and blank lines are fine", "[plot]") {
  TempDir dir("test_plot");
  const fs::path p = dir.root / "log.csv";
  std::ofstream(p) << "epoch,loss,val_loss\r\n0,0.5,NA\r\n\r\n1, 0.25 ,\r\n";
  const trainer::TrainingLog log = trainer::read_training_log(p.string());
  REQUIRE(log.columns == std::vector<std::string>{"loss", "val_loss"});
  REQUIRE(log.epochs == std::vector<double>{0, 1});
  CHECK(log.values[0] == std::vector<double>{0.5, 0.25});
  CHECK(std::isnan(log.values[1][0]));
  CHECK(std::isnan(log.values[1][1]));
}

TEST_CASE("nice_ticks: steps of 1, 2 or 5 times a power of ten inside the range", "[plot]") {
  using trainer::viz::nice_ticks;
  // (0.72 - 0.13) / 5 = 0.118, nearest nice step 0.1.
  const std::vector<double> t = nice_ticks(0.13, 0.72, 6, false);
  REQUIRE(t.size() == 6);
  for (size_t i = 0; i < t.size(); ++i) CHECK(t[i] == Approx(0.2 + 0.1 * double(i)));
  // Epochs 1..3 with target 8: the step would be 0.2 -> at least 1 for integer axes.
  CHECK(nice_ticks(0.5, 3.5, 8, true) == std::vector<double>{1, 2, 3});
  CHECK_THROWS_AS(nice_ticks(1, 1, 6, false), trainer::InternalError);
}

TEST_CASE("plot_curves: bad logs exit with 2 and name the file, line and column", "[plot]") {
  TempDir dir("test_plot");
  struct Case {
    std::string name, text, message;
  };
  const std::vector<Case> cases = {
      {"empty", "", "is empty"},
      {"no_epoch", "loss,val_loss\n0.5,0.6\n", "line 1: the first column is 'loss', not 'epoch'"},
      {"text_value", "epoch,loss,val_loss\n0,0.5,0.6\n1,0.4,abc\n", "line 3, column 'val_loss': 'abc' is not a number"},
      {"short_line", "epoch,loss,val_loss\n0,0.5\n", "line 2: 2 values, but the header (line 1) names 3 columns"},
      {"header_only", "epoch,loss\n", "no epoch lines"},
      {"only_epoch", "epoch\n0\n", "no column besides 'epoch'"},
      {"repeated", "epoch,loss,loss\n0,1,1\n", "column 'loss' appears twice"},
      {"no_epoch_value", "epoch,loss\nNA,0.5\n", "line 2, column 'epoch': the epoch is missing"},
  };
  for (const Case& c : cases) {
    const fs::path log = dir.root / (c.name + ".csv"), png = dir.root / (c.name + ".png");
    std::ofstream(log) << c.text;
    const Run r = plot_curves("--log " + log.string() + " --output " + png.string(), dir.root);
    INFO(c.name << ": " << r.err);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.message) && Catch::Contains(log.string()));
    CHECK_FALSE(fs::exists(png));
  }
  const fs::path missing = dir.root / "missing.csv";
  Run r = plot_curves("--log " + missing.string() + " --output " + (dir.root / "m.png").string(), dir.root);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains(missing.string() + "' does not exist"));
  std::ofstream(dir.root / "ok.csv") << keras_log(3);
  r = plot_curves("--log " + (dir.root / "ok.csv").string() + " --output " + (dir.root / "no/such/c.png").string(),
                  dir.root);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--output: folder '" + (dir.root / "no/such").string() + "'"));
  r = plot_curves("--log " + (dir.root / "ok.csv").string(), dir.root);  // --output is required
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--output"));
}
