#include "data/training_sample.h"

#include <opencv2/core.hpp>

#include <cmath>

#include "data/held_samples.h"

namespace trainer {

SampleAugmentation draw_sample_augmentation(const AugmentationConfig& cfg, uint64_t seed, uint64_t step,
                                            uint64_t position, int h, int w) {
  SampleAugmentation a;
  a.symmetry = draw_symmetry(cfg, seed, step, position);
  a.warp = cfg.affine();
  if (cfg.affine() || cfg.brightness()) a.draw = draw_affine(cfg, seed, step, position, h, w);
  return a;
}

void augmented_sample_to_float(const AugmentationConfig& cfg, const SampleAugmentation& a, const Tensor& images,
                               const Tensor* masks, int i, float* image_to, float* mask_to) {
  const cv::Mat image = held_sample(images, i);
  const cv::Mat mask = mask_to ? held_sample(*masks, i) : cv::Mat();
  // One buffer per thread for each plane, allocated once.
  thread_local cv::Mat image_done, mask_done;
  const cv::Mat* image_from = &image;
  const cv::Mat* mask_from = &mask;
  if (a.warp) {
    const auto m = compose(symmetry_matrix(a.symmetry, image.rows, image.cols), affine_matrix(a.draw, image.rows, image.cols));
    warp_sample(cfg, m, image.depth() == CV_16U ? 65535.0 / 255.0 : 1.0, image, image_done, mask, mask_done);
    image_from = &image_done, mask_from = &mask_done;
  } else if (a.symmetry) {
    apply_symmetry(a.symmetry, image, image_done);
    if (mask_to) apply_symmetry(a.symmetry, mask, mask_done);
    image_from = &image_done, mask_from = &mask_done;
  }
  held_pixels_to_float(*image_from, float(a.draw.brightness), image_to);
  if (mask_to) held_mask_to_float(*mask_from, mask_to);
}

namespace {
/// Largest value of a held type of `bytes` bytes.
double held_max(int bytes) { return bytes == 2 ? 65535.0 : 255.0; }
}  // namespace

SampleWarp sample_warp(const SampleAugmentation& a, int h, int w, int pixel_bytes) {
  std::array<double, 6> m = symmetry_matrix(a.symmetry, h, w);
  if (a.warp) m = compose(m, affine_matrix(a.draw, h, w));
  SampleWarp s;
  for (int k = 0; k < 6; ++k) s.m[k] = float(m[size_t(k)]);
  // held_pixels_to_float's factor: the unit (double) times the brightness as a float.
  const float brightness = float(a.draw.brightness);
  s.scale = float(255.0 / held_max(pixel_bytes) * double(brightness));
  s.clamp = brightness != 1;
  return s;
}

void set_fill(const AugmentationConfig& cfg, int pixel_bytes, AugmentBatch& b) {
  switch (cfg.fill_mode) {
    case FillMode::Constant: b.fill = WarpFill::Constant; break;
    case FillMode::Reflect: b.fill = WarpFill::Reflect; break;
    case FillMode::Wrap: b.fill = WarpFill::Wrap; break;
    case FillMode::Nearest: b.fill = WarpFill::Nearest; break;
  }
  const double held = cfg.cval * (pixel_bytes == 2 ? 65535.0 / 255.0 : 1.0);
  b.cval = float(std::min(std::max(std::nearbyint(held), 0.0), held_max(pixel_bytes)));
}

}  // namespace trainer
