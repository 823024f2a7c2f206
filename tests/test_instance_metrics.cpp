// The DSB 2018 instance metric on hand-made label images with known IoUs, empty
// cases, and random label images against a brute-force computation.
#include <catch2/catch.hpp>
#include <opencv2/imgproc.hpp>
#include <random>

#include "core/error.h"
#include "train/instance_metrics.h"

using namespace trainer;

namespace {

cv::Mat blank(int h = 20, int w = 30) { return cv::Mat::zeros(h, w, CV_32SC1); }

void fill(cv::Mat& m, cv::Rect r, int value) { m(r).setTo(cv::Scalar(value)); }

// Brute force: IoU of every pair from masks, TP counted from the truth side,
// FP from the prediction side (no use of uniqueness), precision per threshold.
std::array<double, kInstanceThresholds> brute_force(const cv::Mat& truth, const cv::Mat& pred) {
  double tmax, pmax;
  cv::minMaxLoc(truth, nullptr, &tmax);
  cv::minMaxLoc(pred, nullptr, &pmax);
  std::vector<int> tids, pids;
  for (int a = 1; a <= int(tmax); ++a)
    if (cv::countNonZero(truth == a)) tids.push_back(a);
  for (int b = 1; b <= int(pmax); ++b)
    if (cv::countNonZero(pred == b)) pids.push_back(b);
  std::vector<std::vector<double>> iou(tids.size(), std::vector<double>(pids.size()));
  for (size_t i = 0; i < tids.size(); ++i)
    for (size_t j = 0; j < pids.size(); ++j) {
      const cv::Mat a = truth == tids[i], b = pred == pids[j];
      iou[i][j] = double(cv::countNonZero(a & b)) / double(cv::countNonZero(a | b));
    }
  std::array<double, kInstanceThresholds> out{};
  for (int k = 0; k < kInstanceThresholds; ++k) {
    const double t = 0.5 + 0.05 * k;
    int tp = 0, fp = 0, fn = 0;
    for (size_t i = 0; i < tids.size(); ++i) {
      bool hit = false;
      for (size_t j = 0; j < pids.size(); ++j) hit = hit || iou[i][j] > t + 1e-12;
      (hit ? tp : fn) += 1;
    }
    for (size_t j = 0; j < pids.size(); ++j) {
      bool hit = false;
      for (size_t i = 0; i < tids.size(); ++i) hit = hit || iou[i][j] > t + 1e-12;
      fp += hit ? 0 : 1;
    }
    out[size_t(k)] = tp + fp + fn == 0 ? 1.0 : double(tp) / double(tp + fp + fn);
  }
  return out;
}

// A label image with up to `objects` random ellipses (later ones overwrite earlier ones).
cv::Mat random_labels(std::mt19937& rng, int objects) {
  cv::Mat m = blank(48, 64);
  std::uniform_int_distribution<int> cx(0, 63), cy(0, 47), ax(2, 9);
  for (int k = 1; k <= objects; ++k)
    cv::ellipse(m, cv::Point(cx(rng), cy(rng)), cv::Size(ax(rng), ax(rng)), 0, 0, 360, cv::Scalar(k), cv::FILLED);
  return m;
}

}  // namespace

TEST_CASE("instance score: a prediction matching one of two nuclei with IoU 0.6", "[instance]") {
  cv::Mat truth = blank(), pred = blank();
  fill(truth, cv::Rect(0, 0, 10, 10), 1);    // 100 pixels
  fill(truth, cv::Rect(15, 5, 10, 10), 2);   // far from the prediction
  fill(pred, cv::Rect(0, 0, 6, 10), 7);      // 60 pixels inside nucleus 1: IoU 60 / 100
  const InstanceScore s = instance_score(truth, pred);
  CHECK(s.n_true == 2);
  CHECK(s.n_pred == 1);
  for (int k = 0; k < kInstanceThresholds; ++k) {
    INFO("threshold " << instance_threshold(k));
    // t < 0.6: TP 1, FP 0, FN 1; t >= 0.6: TP 0, FP 1, FN 2.
    CHECK(s.precision[size_t(k)] == Approx(instance_threshold(k) < 0.6 - 1e-9 ? 1.0 / 2.0 : 0.0));
  }
  CHECK(s.score == Approx(2 * 0.5 / 10));
}

TEST_CASE("instance score: a perfect prediction scores 1, a shifted one less", "[instance]") {
  cv::Mat truth = blank();
  fill(truth, cv::Rect(0, 0, 10, 10), 3);
  fill(truth, cv::Rect(12, 2, 8, 8), 9);
  cv::Mat pred16;
  truth.convertTo(pred16, CV_16U);
  CHECK(instance_score(truth, pred16).score == Approx(1.0));
  cv::Mat shifted = blank();
  fill(shifted, cv::Rect(1, 0, 10, 10), 1);  // IoU 90 / 110 = 0.818
  fill(shifted, cv::Rect(12, 2, 8, 8), 2);
  const InstanceScore s = instance_score(truth, shifted);
  // t = 0.5 .. 0.8 (7 thresholds): both matched; 0.85 .. 0.95: one TP, one FP, one FN.
  CHECK(s.precision[6] == Approx(1.0));
  CHECK(s.precision[7] == Approx(1.0 / 3.0));
  CHECK(s.score == Approx((7 * 1.0 + 3 * (1.0 / 3.0)) / 10));
}

TEST_CASE("instance score: empty truth and empty prediction", "[instance]") {
  cv::Mat empty = blank(), one = blank();
  fill(one, cv::Rect(2, 2, 5, 5), 1);
  const InstanceScore both = instance_score(empty, empty);
  CHECK(both.n_true == 0);
  CHECK(both.n_pred == 0);
  CHECK(both.score == 1.0);  // nothing to find, nothing found wrongly
  const InstanceScore missed = instance_score(one, empty);
  CHECK(missed.n_true == 1);
  CHECK(missed.score == 0.0);
  const InstanceScore invented = instance_score(empty, one);
  CHECK(invented.n_pred == 1);
  CHECK(invented.score == 0.0);
}

TEST_CASE("instance score agrees with a brute-force computation on random label images", "[instance]") {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 30; ++trial) {
    const cv::Mat truth = random_labels(rng, 1 + trial % 8);
    // Prediction: the truth moved by up to 2 pixels, relabelled, plus random extra objects.
    cv::Mat pred = blank(48, 64);
    const cv::Mat shift = (cv::Mat_<double>(2, 3) << 1, 0, double(trial % 3) - 1, 0, 1, double(trial % 5) - 2);
    cv::Mat relabelled = truth * 3 + 100;
    relabelled.setTo(cv::Scalar(0), truth == 0);
    cv::warpAffine(relabelled, pred, shift, truth.size(), cv::INTER_NEAREST);
    const cv::Mat extra = random_labels(rng, trial % 3);
    extra.copyTo(pred, extra > 0);
    const InstanceScore s = instance_score(truth, pred);
    const auto expected = brute_force(truth, pred);
    double mean = 0;
    for (int k = 0; k < kInstanceThresholds; ++k) {
      INFO("trial " << trial << " threshold " << instance_threshold(k));
      CHECK(s.precision[size_t(k)] == Approx(expected[size_t(k)]));
      mean += expected[size_t(k)] / kInstanceThresholds;
    }
    CHECK(s.score == Approx(mean));
  }
}

TEST_CASE("connected objects use 8-connectivity, and bad inputs are rejected", "[instance]") {
  cv::Mat binary = cv::Mat::zeros(6, 6, CV_8UC1);
  binary.at<uchar>(0, 0) = 255;
  binary.at<uchar>(1, 1) = 255;  // diagonal neighbour: same object
  binary.at<uchar>(4, 4) = 1;    // any nonzero is foreground
  const cv::Mat objects = connected_objects(binary);
  CHECK(objects.type() == CV_32SC1);
  CHECK(objects.at<int>(0, 0) == objects.at<int>(1, 1));
  CHECK(objects.at<int>(0, 0) != objects.at<int>(4, 4));
  CHECK(instance_score(objects, objects).n_true == 2);

  CHECK_THROWS_AS(instance_score(cv::Mat::zeros(4, 4, CV_8UC1), blank(4, 4)), InternalError);
  CHECK_THROWS_AS(instance_score(blank(4, 4), blank(5, 4)), InternalError);
  CHECK_THROWS_AS(connected_objects(blank(4, 4)), InternalError);
}
