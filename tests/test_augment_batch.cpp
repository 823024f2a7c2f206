// The backend op augment_batch (backend/augment_math.h) on the CPU against
// the OpenCV path CPU towers augment with (data/training_sample.h): the same
// draws, the same held samples, the same float values but for OpenCV's
// fixed-point rounding. tests/test_gpu_augment_batch.cpp holds the GPU
// kernel against this op.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "backend/train_ops.h"
#include "data/training_sample.h"

using namespace trainer;

namespace {

/// Held samples of type t and shape s: random values below `top` and, with
/// `ignored`, some pixels of the type's largest value (an ignored mask pixel);
/// smooth: a slow wave of the type's range instead, as a microscope image
/// is (neighbours differ by at most 4 units of 8 bits, by 4 * 257 of 16 bits).
Tensor held(DType t, Shape s, unsigned seed, int top, bool ignored = false, bool smooth = false) {
  Tensor h;
  h.set_dtype(t);
  h.resize(s);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(0, top - 1);
  const int largest = t == DType::U8 ? 255 : 65535;
  for (size_t k = 0; k < h.numel(); ++k) {
    const size_t pixel = k / size_t(s.c), x = pixel % size_t(s.w), y = pixel / size_t(s.w) % size_t(s.h);
    const double wave = 127 + 60 * std::sin(0.05 * double(x) + 0.3 * double(k % size_t(s.c))) * std::cos(0.04 * double(y));
    int v = smooth ? int(std::lround(wave * (largest / 255.0))) : u(rng);
    if (ignored && k % 17 == 0) v = largest;
    if (t == DType::U8) static_cast<uint8_t*>(h.raw())[k] = uint8_t(v);
    else static_cast<uint16_t*>(h.raw())[k] = uint16_t(v);
  }
  return h;
}

/// How far augment_batch's batch is from augmented_sample_to_float's.
struct Gap {
  double worst_image = 0;    ///< Largest |difference| of an image value, in held units.
  double exact_image = 0;    ///< Share of image values equal.
  double exact_mask = 0;     ///< Share of mask values equal.
};

/// Both paths on every sample of images and masks with the augmentation
/// drawn for step `step` under cfg.
Gap compare(const AugmentationConfig& cfg, const Tensor& images, const Tensor& masks, uint64_t step) {
  const Shape s = images.shape();
  const int bytes = int(dtype_size(images.dtype()));
  const size_t img = s.sample_numel(), msk = size_t(s.h) * size_t(s.w);
  std::vector<float> want_image(img * size_t(s.n)), want_mask(msk * size_t(s.n));
  std::vector<SampleWarp> warps;
  for (int k = 0; k < s.n; ++k) {
    SampleAugmentation a;
    a.symmetry = draw_symmetry(cfg, 7, step, uint64_t(k));
    a.warp = cfg.affine();
    a.draw = draw_affine(cfg, 7, step, uint64_t(k), s.h, s.w);
    augmented_sample_to_float(cfg, a, images, &masks, k, want_image.data() + size_t(k) * img,
                              want_mask.data() + size_t(k) * msk);
    warps.push_back(sample_warp(a, s.h, s.w, bytes));
  }
  std::vector<float> image(want_image.size()), mask(want_mask.size());
  AugmentBatch b;
  b.n = s.n, b.h = s.h, b.w = s.w, b.c = s.c;
  b.images = images.raw(), b.pixel_bytes = bytes;
  b.masks = masks.raw(), b.mask_bytes = int(dtype_size(masks.dtype()));
  b.warps = warps.data();
  set_fill(cfg, bytes, b);
  b.image_out = image.data(), b.mask_out = mask.data();
  augment_batch(Device{}, b);
  Gap g;
  for (size_t k = 0; k < image.size(); ++k) {
    // In held units: both sides are held values times the sample's scale (or both clamped).
    const double d = std::fabs(double(image[k]) - want_image[k]) / warps[k / img].scale;
    g.worst_image = std::max(g.worst_image, d);
    g.exact_image += image[k] == want_image[k];
  }
  for (size_t k = 0; k < mask.size(); ++k) g.exact_mask += mask[k] == want_mask[k];
  g.exact_image /= double(image.size());
  g.exact_mask /= double(mask.size());
  return g;
}

AugmentationConfig affine_config(FillMode fill) {
  AugmentationConfig cfg;
  cfg.horizontal_flip = cfg.vertical_flip = cfg.rotate_90 = true;
  cfg.rotation_range = 30;
  cfg.width_shift_range = cfg.height_shift_range = 0.3;
  cfg.shear_range = 10;
  cfg.zoom_low = 0.8, cfg.zoom_high = 1.25;
  cfg.brightness_low = 0.7, cfg.brightness_high = 1.3;
  cfg.fill_mode = fill;
  cfg.cval = 100;
  return cfg;
}

}  // namespace

// OpenCV rounds a source coordinate to 1/1024 pixel before rounding it to
// the 1/32 of the interpolation weights; augment_batch rounds it once, so
// points within 1/1024 pixel of a 1/64 boundary (a few percent of them) take
// the neighbouring weight: at most 1/32 of a neighbour difference apart, plus
// one unit for rounding the interpolated value.
TEST_CASE("augment_batch warps, fills and scales as the OpenCV path within one held unit", "[augment_batch]") {
  const Tensor masks = held(DType::U8, Shape{4, 24, 24, 1}, 3, 3, true);
  for (bool smooth : {true, false}) {
    const Tensor images8 = held(DType::U8, Shape{4, 24, 24, 3}, 1, 256, false, smooth);
    const Tensor images16 = held(DType::U16, Shape{4, 24, 24, 1}, 2, 65536, false, smooth);
    for (FillMode fill : {FillMode::Constant, FillMode::Nearest, FillMode::Reflect, FillMode::Wrap})
      for (const Tensor* images : {&images8, &images16})
        for (uint64_t step = 0; step < 4; ++step) {
          const bool wide = images->dtype() == DType::U16;
          INFO("fill " << int(fill) << ", " << dtype_name(images->dtype()) << ", step " << step << ", smooth "
                       << smooth);
          const Gap g = compare(affine_config(fill), *images, masks, step);
          // Smooth: a subpixel step moves a value by at most 4/32 units of 8 bits (257 times that of 16
          // bits); across the edge of a constant fill or the seam of a wrap by at most the wave's range
          // ([67, 187], and cval 100 within it) over 32. Noise: by a neighbour difference (up to the range) over 32.
          const bool seams = fill == FillMode::Constant || fill == FillMode::Wrap;
          const double smooth_step = seams ? 120.0 / 32 : 4.0 / 32;
          const double step_bound = (smooth ? smooth_step : 255.0 / 32) * (wide ? 257 : 1);
          CHECK(g.worst_image <= step_bound + 1 + 1e-3);
          CHECK(g.exact_image >= (smooth ? 0.9 : 0.85));
          CHECK(g.exact_mask >= 0.995);  // nearest: only source points within 1/1024 pixel of a half differ
        }
  }
}

TEST_CASE("augment_batch flips and turns without a warp exactly as the OpenCV path", "[augment_batch]") {
  AugmentationConfig cfg;
  cfg.horizontal_flip = cfg.vertical_flip = cfg.rotate_90 = true;
  const Tensor images = held(DType::U8, Shape{8, 16, 16, 3}, 4, 256);
  const Tensor masks = held(DType::U16, Shape{8, 16, 16, 1}, 5, 300, true);
  for (uint64_t step = 0; step < 4; ++step) {
    const Gap g = compare(cfg, images, masks, step);
    CHECK(g.exact_image == 1.0);
    CHECK(g.exact_mask == 1.0);
  }
  // Brightness alone scales and clamps as the OpenCV path's conversion.
  cfg.brightness_low = 0.5, cfg.brightness_high = 2.0;
  const Gap g = compare(cfg, images, masks, 9);
  CHECK(g.exact_image == 1.0);
}

TEST_CASE("augment_batch takes held pixels of one or two bytes only", "[augment_batch]") {
  AugmentBatch b;
  b.pixel_bytes = 4;
  CHECK_THROWS_AS(augment_batch(Device{}, b), InternalError);
}
