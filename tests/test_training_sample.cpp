// A training sample as Trainer::gather copies it (data/training_sample.h):
// flipped or turned and warped in its held type (uint8, uint16) in one pass,
// then converted to float32 with the brightness, against the same steps one
// at a time in float32 (image_sample_to_float, apply_symmetry, apply_affine).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/class_mask.h"
#include "data/held_samples.h"
#include "data/training_sample.h"
#include "data_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// A held tensor [1, n, n, c] of type t with value(y, x, channel) at each pixel.
template <class F>
Tensor held(DType t, int n, int c, F value) {
  Tensor x(Shape{1, n, n, c});
  x.set_dtype(t);
  cv::Mat m = held_sample(x, 0);
  for (int y = 0; y < n; ++y)
    for (int px = 0; px < n; ++px)
      for (int k = 0; k < c; ++k) {
        const size_t at = (size_t(y) * n + px) * c + k;
        const double v = value(y, px, k);
        if (t == DType::U8) m.data[at] = uint8_t(v);
        else if (t == DType::U16) reinterpret_cast<uint16_t*>(m.data)[at] = uint16_t(v);
        else reinterpret_cast<float*>(m.data)[at] = float(v);
      }
  return x;
}

/// The float32 path: convert, then the symmetry, then the warp and brightness.
void float_path(const AugmentationConfig& cfg, const SampleAugmentation& a, const Tensor& images, const Tensor& masks,
                std::vector<float>& image, std::vector<float>& mask) {
  const Shape s = images.shape();
  std::vector<float> im(image.size()), ms(mask.size());
  image_sample_to_float(images, 0, im.data());
  mask_sample_to_float(masks, 0, ms.data());
  apply_symmetry(a.symmetry, im.data(), image.data(), s.h, s.w, s.c);
  apply_symmetry(a.symmetry, ms.data(), mask.data(), s.h, s.w, 1);
  if (a.warp) apply_affine(cfg, a.draw, image.data(), mask.data(), s.h, s.w, s.c);
  else
    for (float& v : image) v = a.draw.brightness == 1 ? v : std::min(std::max(v * float(a.draw.brightness), 0.f), 255.f);
}

/// The augmented sample through augmented_sample_to_float.
void one_pass(const AugmentationConfig& cfg, const SampleAugmentation& a, const Tensor& images, const Tensor& masks,
              std::vector<float>& image, std::vector<float>& mask) {
  augmented_sample_to_float(cfg, a, images, &masks, 0, image.data(), mask.data());
}

double max_gap(const std::vector<float>& a, const std::vector<float>& b) {
  double g = 0;
  for (size_t k = 0; k < a.size(); ++k) g = std::max(g, std::abs(double(a[k]) - b[k]));
  return g;
}

size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  size_t d = 0;
  for (size_t k = 0; k < a.size(); ++k) d += a[k] != b[k];
  return d;
}

AugmentationConfig random_affine(FillMode fill) {
  AugmentationConfig cfg;
  cfg.rotation_range = 30, cfg.shear_range = 10, cfg.zoom_low = 0.8, cfg.zoom_high = 1.2;
  cfg.width_shift_range = 0.1, cfg.brightness_low = 0.7, cfg.brightness_high = 1.3, cfg.cval = 40;
  cfg.fill_mode = fill;
  return cfg;
}

constexpr int kSide = 24, kChannels = 3;

}  // namespace

TEST_CASE("a sample's symmetry and warp as one composed warp follow the two, one after the other (nearest and reflect fills)",
          "[augmentation]") {
  // A smooth image (at most 3.6 per pixel) and a mask of diagonal bands: OpenCV places each warp's
  // sampling points on a 1/32-pixel grid, so the two ways differ by up to 1/32 pixel of movement.
  const Tensor images = held(DType::F32, kSide, kChannels, [](int y, int x, int k) { return 60 + 3 * x + 2 * y + 20 * k; });
  const Tensor masks = held(DType::F32, kSide, 1, [](int y, int x, int) { return (x + y) / 16; });
  for (FillMode fill : {FillMode::Nearest, FillMode::Reflect})
    for (Symmetry s = 0; s < 8; ++s) {
      const AugmentationConfig cfg = random_affine(fill);
      const SampleAugmentation a{s, true, draw_affine(cfg, 7, s, uint64_t(fill), kSide, kSide)};
      INFO("fill mode " << int(fill) << ", symmetry " << s);
      std::vector<float> image(size_t(kSide * kSide * kChannels)), mask(size_t(kSide * kSide));
      std::vector<float> want_image = image, want_mask = mask;
      one_pass(cfg, a, images, masks, image, mask);
      float_path(cfg, a, images, masks, want_image, want_mask);
      CHECK(max_gap(image, want_image) <= 3.6 / 32 * 1.3 + 0.05);
      CHECK(differing(mask, want_mask) <= mask.size() / 50);
      SampleAugmentation flip_only = a;
      flip_only.warp = false;  // OpenCV's flip and transpose, then the brightness: exact
      one_pass(cfg, flip_only, images, masks, image, mask);
      float_path(cfg, flip_only, images, masks, want_image, want_mask);
      CHECK(max_gap(image, want_image) <= 1e-4);
      CHECK(mask == want_mask);
    }
}

TEST_CASE("a sample warped in its held 8- or 16-bit type follows the same warp in float32 within its rounding",
          "[augmentation]") {
  const auto noise = [](int y, int x, int k) { return double((y * 7919 + x * 104729 + k * 31337) % 256); };
  const auto classes = [](int y, int x, int) { return (y * 31 + x * 17) % 7 == 0 ? 255.0 : double((x + y) % 3); };
  const Tensor f32 = held(DType::F32, kSide, kChannels, noise);
  const Tensor u8 = held(DType::U8, kSide, kChannels, noise);
  const Tensor u16 = held(DType::U16, kSide, kChannels, [&](int y, int x, int k) { return 257 * noise(y, x, k); });
  const Tensor mask_u8 = held(DType::U8, kSide, 1, classes);
  Tensor mask_f32(Shape{1, kSide, kSide, 1});
  mask_sample_to_float(mask_u8, 0, mask_f32.data());  // 255 -> kIgnoredPixel
  for (FillMode fill : {FillMode::Constant, FillMode::Nearest, FillMode::Reflect, FillMode::Wrap})
    for (Symmetry s = 0; s < 8; ++s) {
      const AugmentationConfig cfg = random_affine(fill);
      const SampleAugmentation a{s, true, draw_affine(cfg, 9, s, uint64_t(fill), kSide, kSide)};
      INFO("fill mode " << int(fill) << ", symmetry " << s);
      std::vector<float> image(size_t(kSide * kSide * kChannels)), mask(size_t(kSide * kSide));
      std::vector<float> want_image = image, want_mask = mask;
      one_pass(cfg, a, f32, mask_f32, want_image, want_mask);
      one_pass(cfg, a, u8, mask_u8, image, mask);
      CHECK(max_gap(image, want_image) <= 0.5 * a.draw.brightness + 0.02);  // rounded to whole gray levels
      CHECK(mask == want_mask);
      one_pass(cfg, a, u16, mask_u8, image, mask);
      CHECK(max_gap(image, want_image) <= 0.5 / 257 * a.draw.brightness + 0.02);
    }
}

TEST_CASE("a 16-bit sample's constant fill is cval in pixel values", "[augmentation]") {
  AugmentationConfig cfg;
  cfg.width_shift_range = 10, cfg.fill_mode = FillMode::Constant, cfg.cval = 100;
  const Tensor images = held(DType::U16, 8, 1, [](int y, int x, int) { return 1000 * (y + x); });
  SampleAugmentation a;
  a.warp = true;
  a.draw.shift_x = 4;  // columns 4..7 of the output read past the right edge
  std::vector<float> image(64);
  augmented_sample_to_float(cfg, a, images, nullptr, 0, image.data(), nullptr);
  for (int y = 0; y < 8; ++y) CHECK(image[size_t(y * 8 + 7)] == Approx(100).margin(0.01));
}
