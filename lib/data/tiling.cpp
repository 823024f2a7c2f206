#include "data/tiling.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace trainer {

const char* tile_blend_name(TileBlend blend) { return blend == TileBlend::kGaussian ? "gaussian" : "linear"; }

TileBlend parse_tile_blend(const std::string& name) {
  if (name == "gaussian") return TileBlend::kGaussian;
  if (name == "linear") return TileBlend::kLinear;
  throw InternalError("parse_tile_blend: '" + name + "' is not a tile blend");
}

void check_tile_overlap(double overlap, const std::string& where) {
  if (!(overlap >= 0 && overlap < 1))  // NaN fails too
    throw UserError(where + " " + std::to_string(overlap) + " is outside [0, 1): give the fraction of a tile's side "
                    "that neighbouring tiles share, such as 0.5");
}

std::vector<int> tile_starts(int length, int tile, double overlap) {
  if (tile < 1 || length < tile || !(overlap >= 0 && overlap < 1))
    throw InternalError("tile_starts(" + std::to_string(length) + ", " + std::to_string(tile) + ", " +
                        std::to_string(overlap) + ")");
  const int step = std::max(1, int(std::floor(double(tile) * (1.0 - overlap))));
  const int n = (length - tile + step - 1) / step + 1;
  std::vector<int> starts(size_t(n), 0);
  for (int i = 1; i < n; ++i) starts[size_t(i)] = int(std::lround(double(i) * double(length - tile) / double(n - 1)));
  return starts;
}

namespace {

/// blend's weights along an axis of t pixels, peak 1.
std::vector<float> blend_profile(int t, TileBlend blend) {
  std::vector<float> w(static_cast<size_t>(t));
  const double centre = (t - 1) / 2.0, sigma = t / 8.0, half = std::ceil(t / 2.0);
  for (int i = 0; i < t; ++i) {
    const double d = i - centre;
    w[size_t(i)] = blend == TileBlend::kGaussian ? float(std::exp(-d * d / (2 * sigma * sigma)))
                                                 : float((std::min(i, t - 1 - i) + 1) / half);
  }
  const float peak = *std::max_element(w.begin(), w.end());
  for (float& v : w) v /= peak;
  return w;
}

}  // namespace

cv::Mat blend_window(cv::Size tile, TileBlend blend) {
  const std::vector<float> wy = blend_profile(tile.height, blend), wx = blend_profile(tile.width, blend);
  cv::Mat w(tile, CV_32FC1);
  for (int y = 0; y < tile.height; ++y)
    for (int x = 0; x < tile.width; ++x) w.at<float>(y, x) = wy[size_t(y)] * wx[size_t(x)];
  return w;
}

BlendBand::BlendBand(cv::Size image, cv::Size tile, int channels, TileBlend blend, RowSink sink)
    : image_(image), tile_(tile), channels_(channels), window_(blend_window(tile, blend)),
      sum_(cv::Mat::zeros(tile.height, image.width, CV_32FC(channels))),
      weight_(cv::Mat::zeros(tile.height, image.width, CV_32FC1)), sink_(std::move(sink)) {
  if (tile.width > image.width || tile.height > image.height || channels < 1)
    throw InternalError("BlendBand: a tile larger than its image, or no channel");
}

void BlendBand::add(cv::Point at, const float* p) {
  if (at.y < top_ || at.x < 0 || at.x + tile_.width > image_.width || at.y + tile_.height > image_.height)
    throw InternalError("BlendBand::add: tile at (" + std::to_string(at.x) + ", " + std::to_string(at.y) +
                        ") is above the band or outside the image");
  send_until(at.y);
  const size_t k = size_t(channels_);
  for (int r = 0; r < tile_.height; ++r) {
    const float* w = window_.ptr<float>(r);
    const float* in = p + size_t(r) * size_t(tile_.width) * k;
    float* s = sum_.ptr<float>(r) + size_t(at.x) * k;
    float* ws = weight_.ptr<float>(r) + at.x;
    for (int x = 0; x < tile_.width; ++x) {
      ws[x] += w[x];
      for (size_t c = 0; c < k; ++c) s[size_t(x) * k + c] += w[x] * in[size_t(x) * k + c];
    }
  }
}

void BlendBand::send_until(int y) {
  const int n = std::min(y, image_.height) - top_;
  if (n <= 0) return;
  if (n > tile_.height) throw InternalError("BlendBand: rows between two tile rows were never covered");
  out_.create(n, image_.width, CV_32FC(channels_));
  const size_t k = size_t(channels_);
  for (int r = 0; r < n; ++r) {
    const float* s = sum_.ptr<float>(r);
    const float* ws = weight_.ptr<float>(r);
    float* o = out_.ptr<float>(r);
    for (int x = 0; x < image_.width; ++x) {
      if (!(ws[x] > 0)) throw InternalError("BlendBand: pixel (" + std::to_string(x) + ", " +
                                            std::to_string(top_ + r) + ") was covered by no tile");
      for (size_t c = 0; c < k; ++c) o[size_t(x) * k + c] = s[size_t(x) * k + c] / ws[x];
    }
  }
  sink_(top_, out_);
  // The band moves down by n rows: the rows below the sent ones up, zeros after them.
  const int kept = tile_.height - n;
  if (kept > 0) {  // overlapping rows of one continuous Mat: memmove
    std::memmove(sum_.ptr(0), sum_.ptr(n), size_t(kept) * sum_.step[0]);
    std::memmove(weight_.ptr(0), weight_.ptr(n), size_t(kept) * weight_.step[0]);
  }
  sum_.rowRange(kept, tile_.height).setTo(0);
  weight_.rowRange(kept, tile_.height).setTo(0);
  top_ += n;
}

void BlendBand::finish() { send_until(image_.height); }

}  // namespace trainer
