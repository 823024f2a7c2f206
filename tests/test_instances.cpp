// split_instances: touching synthetic discs come apart along their neck,
// single nuclei (round, elongated, with a bump on their outline) stay whole,
// and every foreground pixel gets a label numbered in raster order.
#include <catch2/catch.hpp>

#include <opencv2/imgproc.hpp>
#include <map>
#include <set>

#include "core/error.h"
#include "data/instances.h"

using namespace trainer;

namespace {

/// The distinct labels above 0.
std::set<int> labels_of(const cv::Mat& labels) {
  std::set<int> out;
  for (int y = 0; y < labels.rows; ++y)
    for (int x = 0; x < labels.cols; ++x)
      if (const int l = labels.at<int>(y, x)) out.insert(l);
  return out;
}

/// The share of disc's pixels (a 0/255 mask) that carry its most frequent label.
double purity(const cv::Mat& labels, const cv::Mat& disc) {
  std::map<int, int> count;
  for (int y = 0; y < labels.rows; ++y)
    for (int x = 0; x < labels.cols; ++x)
      if (disc.at<uint8_t>(y, x)) ++count[labels.at<int>(y, x)];
  int best = 0;
  for (const auto& [l, c] : count) best = std::max(best, c);
  return double(best) / cv::countNonZero(disc);
}

cv::Mat disc(cv::Size size, cv::Point centre, int radius) {
  cv::Mat m = cv::Mat::zeros(size, CV_8UC1);
  cv::circle(m, centre, radius, cv::Scalar(255), cv::FILLED);
  return m;
}

}  // namespace

TEST_CASE("split_instances separates touching discs and keeps single nuclei whole", "[instances]") {
  const cv::Size size(120, 80);
  SECTION("two touching discs of different sizes") {
    const cv::Mat a = disc(size, {40, 40}, 16), b = disc(size, {68, 44}, 13);
    const cv::Mat labels = split_instances(a | b);
    REQUIRE(labels.type() == CV_32SC1);
    CHECK(labels_of(labels) == std::set<int>{1, 2});
    CHECK(purity(labels, a) > 0.95);
    CHECK(purity(labels, b) > 0.95);
    CHECK(labels.at<int>(40, 40) != labels.at<int>(44, 68));
    CHECK(cv::countNonZero(labels) == cv::countNonZero(a | b));  // every foreground pixel labelled, no other
    CHECK(cv::countNonZero((labels != 0) != ((a | b) != 0)) == 0);
  }
  SECTION("a chain of three, and a separate one: raster order") {
    const cv::Mat m = disc(size, {20, 20}, 10) | disc(size, {38, 20}, 10) | disc(size, {56, 20}, 10) |
                      disc(size, {90, 60}, 8);
    const cv::Mat labels = split_instances(m);
    CHECK(labels_of(labels).size() == 4);
    CHECK(labels.at<int>(10, 20) == 1);  // the first pixel in raster order belongs to the leftmost disc's top
    CHECK(labels.at<int>(60, 90) == 4);
  }
  SECTION("one round, one elongated and one bumpy nucleus stay whole") {
    cv::Mat m = disc(size, {20, 20}, 12);
    cv::ellipse(m, {70, 20}, {30, 9}, 0, 0, 360, cv::Scalar(255), cv::FILLED);
    m |= disc(size, {40, 60}, 14) | disc(size, {52, 60}, 4);  // a small bump on the outline
    CHECK(labels_of(split_instances(m)).size() == 3);
  }
  SECTION("a shallow neck stays one nucleus at a large depth, two at a small one") {
    const cv::Mat m = disc(size, {40, 40}, 15) | disc(size, {64, 40}, 15);
    CHECK(labels_of(split_instances(m, InstanceSplit{2.0})).size() == 2);
    CHECK(labels_of(split_instances(m, InstanceSplit{10.0})).size() == 1);
    CHECK(labels_of(split_instances(m, InstanceSplit{0.0})).size() == 1);  // no split: components
  }
  SECTION("empty and tiny masks") {
    CHECK(cv::countNonZero(split_instances(cv::Mat::zeros(size, CV_8UC1))) == 0);
    cv::Mat dot = cv::Mat::zeros(size, CV_8UC1);
    dot.at<uint8_t>(0, 0) = 1;
    dot.at<uint8_t>(79, 119) = 7;
    CHECK(labels_of(split_instances(dot)) == std::set<int>{1, 2});
  }
  CHECK_THROWS_AS(split_instances(cv::Mat::zeros(size, CV_32FC1)), InternalError);
}
