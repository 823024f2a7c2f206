// Tiled (sliding-window) prediction: where tiles go, the blend windows, the
// band accumulation, and predict_tiled against a whole-image prediction of
// networks whose output a tile boundary cannot change (1x1 convolutions; a
// pooling network with tiles on its stride).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include <opencv2/imgproc.hpp>

#include "config/config.h"
#include "data/tiling.h"
#include "train/tiled_predict.h"
#include "train/trainer.h"

using namespace trainer;

namespace {

/// A network of Input [h, w, c] whose layers (YAML lines) end in a one-filter sigmoid 1x1 convolution.
Config tiling_config(int h, int w, int c, const std::string& layers) {
  const std::string yaml = "model:\n  name: tiling\n  layers:\n    - {name: in, type: Input, shape: [" +
                           std::to_string(h) + ", " + std::to_string(w) + ", " + std::to_string(c) + "]}\n" +
                           "    - {name: scale, type: Rescaling, scale: 0.00392156862745098}\n" + layers +
                           "    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}\n"
                           "data: {images: unused, masks: unused}\ntraining: {batch_size: 4, seed: 3}\n";
  return parse_config(yaml, "tiling.yaml");
}

const char* const kPointwise =
    "    - {name: c1, type: Conv2D, filters: 6, kernel_size: 1, activation: relu, bias_initializer: ones}\n";
const char* const kPooled =
    "    - {name: c1, type: Conv2D, filters: 6, kernel_size: 1, activation: relu, bias_initializer: ones}\n"
    "    - {name: p1, type: MaxPooling2D}\n"
    "    - {name: c2, type: Conv2D, filters: 6, kernel_size: 1, activation: relu}\n"
    "    - {name: u1, type: UpSampling2D}\n";
const char* const kThreeByThree =
    "    - {name: c1, type: Conv2D, filters: 6, kernel_size: 3, padding: same, activation: relu}\n";

/// Random 8-bit pixels [h, w, c].
cv::Mat random_pixels(int h, int w, int c, unsigned seed) {
  cv::Mat m(h, w, CV_8UC(c));
  cv::RNG rng(seed);
  rng.fill(m, cv::RNG::UNIFORM, 0, 256);
  return m;
}

/// The prediction of pixels by a model whose Input is pixels' size, with `tiled`'s weights.
cv::Mat whole_image_prediction(Trainer& tiled, const cv::Mat& pixels, const std::string& layers) {
  Trainer whole(tiling_config(pixels.rows, pixels.cols, pixels.channels(), layers), 1, 1);
  whole.load_weights(tiled.weights(), "the tiled model");
  Tensor x(Shape{1, pixels.rows, pixels.cols, pixels.channels()});
  cv::Mat xf(pixels.rows, pixels.cols, CV_32FC(pixels.channels()), x.data());
  pixels.convertTo(xf, CV_32F);
  const Tensor p = whole.predict(x, 1);
  return cv::Mat(pixels.rows, pixels.cols, CV_32FC1, const_cast<float*>(p.data())).clone();
}

double max_abs_diff(const cv::Mat& a, const cv::Mat& b) { return cv::norm(a, b, cv::NORM_INF); }

}  // namespace

TEST_CASE("tile_starts covers the axis from 0 to its end, neighbours at most a step apart", "[tiling]") {
  for (int length : {16, 17, 40, 100, 1037})
    for (int tile : {1, 7, 16})
      for (double overlap : {0.0, 0.25, 0.5, 0.9}) {
        if (tile > length) continue;
        INFO("length " << length << ", tile " << tile << ", overlap " << overlap);
        const std::vector<int> s = tile_starts(length, tile, overlap);
        const int step = std::max(1, int(std::floor(tile * (1 - overlap))));
        REQUIRE(!s.empty());
        CHECK(s.front() == 0);
        CHECK(s.back() == length - tile);
        for (size_t i = 1; i < s.size(); ++i) {
          CHECK(s[i] > s[i - 1]);
          CHECK(s[i] - s[i - 1] <= step);
        }
        // As few as that allows: one tile fewer would need a step above it.
        if (s.size() > 1) CHECK(int(s.size() - 2) * step < length - tile);
      }
  CHECK(tile_starts(64, 16, 0.5) == std::vector<int>{0, 8, 16, 24, 32, 40, 48});
  CHECK(tile_starts(16, 16, 0.5) == std::vector<int>{0});
  CHECK_THROWS_AS(tile_starts(15, 16, 0.5), InternalError);
  CHECK_THROWS_AS(tile_starts(32, 16, 1.0), InternalError);
  CHECK_THROWS_AS(check_tile_overlap(1.0, "--tile-overlap"), UserError);
  CHECK_THROWS_AS(check_tile_overlap(std::nan(""), "--tile-overlap"), UserError);
  CHECK_NOTHROW(check_tile_overlap(0.0, "--tile-overlap"));
}

TEST_CASE("blend windows peak at 1 in the middle, fall towards the edges and stay positive", "[tiling]") {
  for (TileBlend blend : {TileBlend::kGaussian, TileBlend::kLinear})
    for (cv::Size size : {cv::Size(16, 16), cv::Size(9, 12), cv::Size(1, 5)}) {
      INFO(tile_blend_name(blend) << " " << size);
      const cv::Mat w = blend_window(size, blend);
      double lo = 0, hi = 0;
      cv::minMaxLoc(w, &lo, &hi);
      CHECK(hi == Approx(1.0));
      CHECK(lo > 0);
      cv::Mat flipped;
      cv::flip(w, flipped, -1);
      CHECK(max_abs_diff(w, flipped) < 1e-6);  // symmetric about the middle
      if (size.height > 2) CHECK(w.at<float>(0, size.width / 2) < w.at<float>(size.height / 2, size.width / 2));
    }
  // sigma = 16 / 8 = 2: the first of 16 pixels is 7.5 from the middle.
  CHECK(blend_window({16, 1}, TileBlend::kGaussian).at<float>(0, 0) ==
        Approx(std::exp(-7.5 * 7.5 / 8) / std::exp(-0.5 * 0.5 / 8)));
  CHECK(blend_window({16, 1}, TileBlend::kLinear).at<float>(0, 0) == Approx(1.0 / 8));
}

TEST_CASE("BlendBand sends every row once, in order, as the windows' weighted mean", "[tiling]") {
  const cv::Size image(23, 37), tile(8, 8);
  const std::vector<int> ys = tile_starts(image.height, tile.height, 0.4), xs = tile_starts(image.width, tile.width, 0.4);
  cv::Mat got(image, CV_32FC2, cv::Scalar(-1, -1)), sum(image, CV_64FC2, cv::Scalar(0, 0)), wsum(image, CV_64FC1, 0.0);
  int next = 0;
  size_t most = 0;
  BlendBand band(image, tile, 2, TileBlend::kLinear, [&](int y0, const cv::Mat& rows) {
    CHECK(y0 == next);  // in order, none twice, none left out
    next = y0 + rows.rows;
    most = std::max(most, size_t(rows.rows));
    rows.copyTo(got.rowRange(y0, next));
  });
  const cv::Mat w = blend_window(tile, TileBlend::kLinear);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> p(size_t(tile.area()) * 2);
  for (int y : ys)
    for (int x : xs) {
      for (float& v : p) v = u(rng);
      band.add({x, y}, p.data());
      for (int r = 0; r < tile.height; ++r)
        for (int c = 0; c < tile.width; ++c) {
          const double wi = w.at<float>(r, c);
          const size_t k = size_t(r * tile.width + c) * 2;
          sum.at<cv::Vec2d>(y + r, x + c) += cv::Vec2d(wi * p[k], wi * p[k + 1]);
          wsum.at<double>(y + r, x + c) += wi;
        }
    }
  band.finish();
  CHECK(next == image.height);
  CHECK(most <= size_t(tile.height));
  double worst = 0;
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x)
      for (int c = 0; c < 2; ++c)
        worst = std::max(worst, std::abs(got.at<cv::Vec2f>(y, x)[c] - sum.at<cv::Vec2d>(y, x)[c] / wsum.at<double>(y, x)));
  CHECK(worst < 1e-6);
  CHECK_THROWS_AS(band.add({0, 0}, p.data()), InternalError);  // above the band
}

TEST_CASE("A tiled prediction equals the whole image's where tiles cannot change the network's output", "[tiling]") {
  SECTION("1x1 convolutions, any tile placement, padding of a smaller image, TTA") {
    Trainer trainer(tiling_config(16, 16, 3, kPointwise), 2, 1);
    for (cv::Size size : {cv::Size(37, 50), cv::Size(16, 16), cv::Size(7, 10), cv::Size(40, 9), cv::Size(1, 1)}) {
      INFO("image " << size);
      const cv::Mat pixels = random_pixels(size.height, size.width, 3, unsigned(size.area()));
      const cv::Mat whole = whole_image_prediction(trainer, pixels, kPointwise);
      for (double overlap : {0.0, 0.3, 0.5})
        for (TileBlend blend : {TileBlend::kGaussian, TileBlend::kLinear}) {
          const cv::Mat tiled = predict_tiled_map(trainer, pixels, TiledPrediction{{overlap, blend}, 3, false});
          REQUIRE(tiled.size() == size);
          CHECK(max_abs_diff(tiled, whole) < 2e-6);
        }
      CHECK(max_abs_diff(predict_tiled_map(trainer, pixels, TiledPrediction{{0.5, TileBlend::kGaussian}, 4, true}),
                         whole) < 2e-6);
    }
  }
  SECTION("at a scale: the image resized, predicted in tiles, the probabilities resized back") {
    Trainer trainer(tiling_config(16, 16, 3, kPointwise), 1, 1);
    const cv::Mat pixels = random_pixels(61, 45, 3, 5);
    cv::Mat half, back;
    cv::resize(pixels, half, cv::Size(23, 31), 0, 0, cv::INTER_AREA);  // 45 x 0.5 and 61 x 0.5, rounded
    cv::resize(whole_image_prediction(trainer, half, kPointwise), back, pixels.size(), 0, 0, cv::INTER_LINEAR);
    TileOptions t;
    t.scale = 0.5;
    const cv::Mat tiled = predict_tiled_map(trainer, pixels, TiledPrediction{t, 2, false});
    REQUIRE(tiled.size() == pixels.size());
    CHECK(max_abs_diff(tiled, back) < 2e-6);
  }
  SECTION("pooling and upsampling, tiles on multiples of the stride") {
    Trainer trainer(tiling_config(16, 16, 1, kPooled), 1, 1);
    const cv::Mat pixels = random_pixels(64, 48, 1, 9);  // tile_starts: 0, 8, ... on both axes
    const cv::Mat whole = whole_image_prediction(trainer, pixels, kPooled);
    CHECK(max_abs_diff(predict_tiled_map(trainer, pixels, TiledPrediction{{0.5, TileBlend::kGaussian}, 5, false}),
                       whole) < 2e-6);
  }
  SECTION("3x3 convolutions: equal away from the tiles' borders, close at them") {
    Trainer trainer(tiling_config(16, 16, 3, kThreeByThree), 1, 1);
    const cv::Mat pixels = random_pixels(40, 40, 3, 11);
    const cv::Mat whole = whole_image_prediction(trainer, pixels, kThreeByThree);
    const cv::Mat tiled = predict_tiled_map(trainer, pixels, TiledPrediction{{0.0, TileBlend::kGaussian}, 2, false});
    // overlap 0 on 40 px: tiles at 0, 12, 24; only the pixels at a tile's edge saw its zero padding.
    CHECK(max_abs_diff(tiled(cv::Rect(1, 1, 10, 10)), whole(cv::Rect(1, 1, 10, 10))) < 2e-6);
    CHECK(max_abs_diff(tiled, whole) > 1e-4);
    CHECK(max_abs_diff(tiled, whole) < 0.5);
  }
}
