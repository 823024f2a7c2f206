#include "data/affine_augmentation.h"

#include <cmath>
#include <opencv2/imgproc.hpp>

#include "backend/elementwise_math.h"
#include "data/augmentation.h"

namespace trainer {

namespace {

/// Separates these draws from the flips' and Dropout's, which mix the same seed and step.
constexpr uint64_t kAffineSalt = 0x616666696e652121ULL;  // "affine!!"
constexpr double kPi = 3.14159265358979323846;

/// Draw i of key: uniform in [0, 1), 53 bits (the (i+1)-th output of a splitmix64 stream).
double uniform(uint64_t key, uint64_t i) {
  return double(mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1.0p-53;
}

/// U(lo, hi) from draw u in [0, 1).
double between(double lo, double hi, double u) { return lo + (hi - lo) * u; }

/// A shift range as pixels of a side of `size` pixels: fractions below 1, pixels from 1.
double shift_pixels(double range, int size) { return range < 1 ? range * size : range; }

int border(FillMode fill_mode) {
  switch (fill_mode) {
    case FillMode::Constant: return cv::BORDER_CONSTANT;
    case FillMode::Reflect: return cv::BORDER_REFLECT;
    case FillMode::Wrap: return cv::BORDER_WRAP;
    case FillMode::Nearest: break;
  }
  return cv::BORDER_REPLICATE;
}

}  // namespace

AffineDraw draw_affine(const AugmentationConfig& cfg, uint64_t seed, uint64_t step, uint64_t position, int h, int w) {
  const uint64_t key = sample_key(seed, kAffineSalt, step, position);
  AffineDraw d;
  const double rx = shift_pixels(cfg.width_shift_range, w), ry = shift_pixels(cfg.height_shift_range, h);
  d.theta = between(-cfg.rotation_range, cfg.rotation_range, uniform(key, 0));
  d.shift_x = between(-rx, rx, uniform(key, 1));
  d.shift_y = between(-ry, ry, uniform(key, 2));
  d.shear = between(-cfg.shear_range, cfg.shear_range, uniform(key, 3));
  d.zoom_x = between(cfg.zoom_low, cfg.zoom_high, uniform(key, 4));
  d.zoom_y = between(cfg.zoom_low, cfg.zoom_high, uniform(key, 5));
  d.brightness = between(cfg.brightness_low, cfg.brightness_high, uniform(key, 6));
  return d;
}

std::array<double, 6> affine_matrix(const AffineDraw& d, int h, int w) {
  const double t = d.theta * kPi / 180, s = d.shear * kPi / 180;
  const double ct = std::cos(t), st = std::sin(t);
  // A = R Sh Z: R = [[ct, -st], [st, ct]], Sh = [[1, -sin s], [0, cos s]], Z = diag(zoom_x, zoom_y).
  const double sh01 = -std::sin(s), sh11 = std::cos(s);
  const double a00 = ct * d.zoom_x, a01 = (ct * sh01 - st * sh11) * d.zoom_y;
  const double a10 = st * d.zoom_x, a11 = (st * sh01 + ct * sh11) * d.zoom_y;
  const double cx = (w - 1) / 2.0, cy = (h - 1) / 2.0;
  // source = c + A (p - c) + R t.
  const double tx = ct * d.shift_x - st * d.shift_y, ty = st * d.shift_x + ct * d.shift_y;
  return {a00, a01, cx - a00 * cx - a01 * cy + tx, a10, a11, cy - a10 * cx - a11 * cy + ty};
}

std::array<double, 6> compose(const std::array<double, 6>& o, const std::array<double, 6>& i) {
  return {o[0] * i[0] + o[1] * i[3], o[0] * i[1] + o[1] * i[4], o[0] * i[2] + o[1] * i[5] + o[2],
          o[3] * i[0] + o[4] * i[3], o[3] * i[1] + o[4] * i[4], o[3] * i[2] + o[4] * i[5] + o[5]};
}

void warp_sample(const AugmentationConfig& cfg, const std::array<double, 6>& m, double cval_scale, const cv::Mat& image,
                 cv::Mat& image_out, const cv::Mat& mask, cv::Mat& mask_out) {
  const cv::Mat map(2, 3, CV_64F, const_cast<double*>(m.data()));
  const int b = border(cfg.fill_mode), inverse = cv::WARP_INVERSE_MAP;
  cv::warpAffine(image, image_out, map, image.size(), cv::INTER_LINEAR | inverse, b, cv::Scalar::all(cfg.cval * cval_scale));
  if (!mask.empty()) cv::warpAffine(mask, mask_out, map, mask.size(), cv::INTER_NEAREST | inverse, b, cv::Scalar::all(0));
}

}  // namespace trainer
