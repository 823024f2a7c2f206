// Masks stay on their images when both are resized to the model's input, and
// predictions resized back land where the objects are. Synthetic discs (a
// bright disc on a dark image, its mask) at sub-pixel positions are decoded
// as training reads them (decode_image; decode_mask, decode_class_mask) at
// downscales by 2, 3, 4 and 5.3 and an upscale by 2: over 12 discs, the mean
// offset between the mask's centroid and the image's intensity-weighted
// centroid stays within 0.1 pixel. A mask resized by nearest neighbour sits
// (s - 1) / (2 s) pixels down and to the right (0.25 at s = 2) and fails.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include "core/tensor.h"
#include "data/image_decode.h"
#include "process_testing.h"
#include "train/predict.h"

using namespace trainer;
using trainer::testing::TempDir;

namespace {

constexpr int kWidth = 240, kHeight = 200;
constexpr double kRadius = 36, kBackground = 20, kDisc = 200;

/// Disc k's centre: spread over the image at varied sub-pixel positions.
cv::Point2d centre(int k) { return {70.0 + 33.37 * (k % 4), 62.0 + 37.71 * (k / 4)}; }

/// The centroid of the pixels of m (CV_32FC1) weighted by m - floor, (x, y) in pixel-centre coordinates.
cv::Point2d centroid(const cv::Mat& m, double floor = 0) {
  double sx = 0, sy = 0, sw = 0;
  for (int y = 0; y < m.rows; ++y)
    for (int x = 0; x < m.cols; ++x) {
      const double w = std::max(0.0, double(m.at<float>(y, x)) - floor);
      sx += w * x, sy += w * y, sw += w;
    }
  return {sx / sw, sy / sw};
}

/// Writes disc k as image.png (kBackground, kDisc inside), mask.png (0/255) and classes.png (class 2 inside,
/// class 1 on a 3-pixel rim, 0 outside) into dir.
void write_disc(const std::filesystem::path& dir, int k) {
  cv::Mat image(kHeight, kWidth, CV_8UC1), mask(kHeight, kWidth, CV_8UC1), classes(kHeight, kWidth, CV_8UC1);
  const cv::Point2d c = centre(k);
  for (int y = 0; y < kHeight; ++y)
    for (int x = 0; x < kWidth; ++x) {
      const double r = std::hypot(x - c.x, y - c.y);
      image.at<uint8_t>(y, x) = uint8_t(r <= kRadius ? kDisc : kBackground);
      mask.at<uint8_t>(y, x) = uint8_t(r <= kRadius ? 255 : 0);
      classes.at<uint8_t>(y, x) = uint8_t(r <= kRadius - 3 ? 2 : r <= kRadius ? 1 : 0);
    }
  cv::imwrite((dir / "image.png").string(), image);
  cv::imwrite((dir / "mask.png").string(), mask);
  cv::imwrite((dir / "classes.png").string(), classes);
}

struct Offsets {
  double mean_dx = 0, mean_dy = 0, worst = 0;
  void add(cv::Point2d d, int n) {
    mean_dx += d.x / n, mean_dy += d.y / n;
    worst = std::max(worst, std::max(std::abs(d.x), std::abs(d.y)));
  }
};

}  // namespace

TEST_CASE("masks and class masks stay on their images when both are resized, by any factor", "[data][alignment]") {
  TempDir dir("mask_alignment");
  const std::vector<cv::Size> sizes = {{120, 100}, {80, 67}, {60, 50}, {45, 38}, {480, 400}};
  const int discs = 12;
  for (const cv::Size& size : sizes) {
    INFO("resized from " << kWidth << "x" << kHeight << " to " << size.width << "x" << size.height);
    Offsets binary, classes;
    for (int k = 0; k < discs; ++k) {
      write_disc(dir.root, k);
      cv::Mat image(size, CV_32FC1), mask(size, CV_32FC1), class_mask(size, CV_32FC1);
      decode_image((dir.root / "image.png").string(), size.height, size.width, 1, image.ptr<float>());
      decode_mask((dir.root / "mask.png").string(), size.height, size.width, mask.ptr<float>());
      decode_class_mask((dir.root / "classes.png").string(), size.height, size.width, 3, class_mask.ptr<float>(), -1);
      const cv::Point2d at = centroid(image, kBackground);
      binary.add(centroid(mask) - at, discs);
      cv::Mat object;
      cv::Mat(class_mask > 0.5f).convertTo(object, CV_32F, 1.0 / 255);
      classes.add(centroid(object) - at, discs);
    }
    INFO("binary masks: mean offset (" << binary.mean_dx << ", " << binary.mean_dy << ") px, worst " << binary.worst);
    INFO("class masks: mean offset (" << classes.mean_dx << ", " << classes.mean_dy << ") px, worst " << classes.worst);
    CHECK(std::abs(binary.mean_dx) < 0.1);
    CHECK(std::abs(binary.mean_dy) < 0.1);
    CHECK(std::abs(classes.mean_dx) < 0.1);
    CHECK(std::abs(classes.mean_dy) < 0.1);
    CHECK(binary.worst < 0.5);
    CHECK(classes.worst < 0.5);
  }
}

TEST_CASE("probabilities resized back to the image's size land on the objects", "[predict][alignment]") {
  TempDir dir("probability_alignment");
  const int discs = 12;
  for (const cv::Size& size : std::vector<cv::Size>{{120, 100}, {60, 50}, {45, 38}}) {
    const double scale = double(kWidth) / size.width;
    INFO("model input " << size.width << "x" << size.height);
    Offsets back;
    for (int k = 0; k < discs; ++k) {
      write_disc(dir.root, k);
      // The perfect prediction at the model's size: the decoded disc as a probability.
      Tensor probs(Shape{1, size.height, size.width, 1});
      decode_image((dir.root / "image.png").string(), size.height, size.width, 1, probs.sample(0));
      for (size_t i = 0; i < probs.numel(); ++i)
        probs.data()[i] = float((probs.data()[i] - kBackground) / (kDisc - kBackground));
      const cv::Mat prob = probability_map(probs, 0, cv::Size(kWidth, kHeight));
      cv::Mat object;
      cv::Mat(prob > 0.5f).convertTo(object, CV_32F, 1.0 / 255);
      cv::Mat truth(kHeight, kWidth, CV_32FC1);
      decode_mask((dir.root / "mask.png").string(), kHeight, kWidth, truth.ptr<float>());
      back.add(centroid(object) - centroid(truth), discs);
    }
    INFO("mean offset (" << back.mean_dx << ", " << back.mean_dy << ") image px, worst " << back.worst);
    // 0.1 of a model pixel, in the image's pixels.
    CHECK(std::abs(back.mean_dx) < 0.1 * scale);
    CHECK(std::abs(back.mean_dy) < 0.1 * scale);
  }
}
