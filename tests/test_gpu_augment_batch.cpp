// The GPU kernel of augment_batch against the CPU op (tests/test_augment_batch.cpp
// holds that against the OpenCV path): the same functions of
// backend/augment_math.h, fused multiply-adds throughout, so the same bits.
#include <catch2/catch.hpp>

#include <random>

#include "backend/train_ops.h"
#include "data/training_sample.h"
#include "gpu_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// n random held values of T below top, every 13th the type's largest (ignored, for masks).
template <class T>
std::vector<T> held_values(size_t n, unsigned seed, int top) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(0, top - 1);
  std::vector<T> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = k % 13 == 0 ? T(~T(0)) : T(u(rng));
  return v;
}

/// augment_batch of b's held values (host arrays in b) on device d; returns {images, masks}.
template <class T>
std::pair<std::vector<float>, std::vector<float>> run(const Device& d, AugmentBatch b, const std::vector<T>& images,
                                                      const std::vector<uint8_t>& masks,
                                                      const std::vector<SampleWarp>& warps) {
  const size_t pixels = size_t(b.n) * size_t(b.h) * size_t(b.w);
  Buffer<T> di = upload(images, d);
  Buffer<uint8_t> dm = upload(masks, d);
  Buffer<SampleWarp> dw = upload(warps, d);
  Buffer<float> out(d), mask_out(d);
  out.resize(pixels * size_t(b.c));
  mask_out.resize(pixels);
  b.images = di.data(), b.masks = dm.data(), b.warps = dw.data();
  b.image_out = out.data(), b.mask_out = mask_out.data();
  augment_batch(d, b);
  return {download(out), download(mask_out)};
}

}  // namespace

TEST_CASE("GPU augment_batch computes the CPU op's values bit for bit", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  AugmentationConfig cfg;
  cfg.horizontal_flip = cfg.rotate_90 = true;
  cfg.rotation_range = 25, cfg.width_shift_range = 0.2, cfg.shear_range = 5;
  cfg.zoom_low = 0.9, cfg.zoom_high = 1.2, cfg.brightness_low = 0.8, cfg.brightness_high = 1.2;
  cfg.cval = 40;
  const int n = 5, side = 37, c = 3;
  const std::vector<uint8_t> masks = held_values<uint8_t>(size_t(n) * side * side, 3, 4);
  for (FillMode fill : {FillMode::Constant, FillMode::Nearest, FillMode::Reflect, FillMode::Wrap})
    for (int bytes : {1, 2}) {
      INFO("fill " << int(fill) << ", " << bytes << "-byte pixels");
      cfg.fill_mode = fill;
      std::vector<SampleWarp> warps;
      for (int k = 0; k < n; ++k) {
        SampleAugmentation a;
        a.symmetry = draw_symmetry(cfg, 11, 3, uint64_t(k));
        a.warp = k % 4 != 0;  // a symmetry alone too
        a.draw = draw_affine(cfg, 11, 3, uint64_t(k), side, side);
        warps.push_back(sample_warp(a, side, side, bytes));
      }
      AugmentBatch b;
      b.n = n, b.h = side, b.w = side, b.c = c, b.pixel_bytes = bytes, b.mask_bytes = 1;
      set_fill(cfg, bytes, b);
      const size_t values = size_t(n) * side * side * c;
      const auto cpu = bytes == 1 ? run(Device{}, b, held_values<uint8_t>(values, 1, 256), masks, warps)
                                  : run(Device{}, b, held_values<uint16_t>(values, 2, 65536), masks, warps);
      const auto gpu = bytes == 1 ? run(g.device, b, held_values<uint8_t>(values, 1, 256), masks, warps)
                                  : run(g.device, b, held_values<uint16_t>(values, 2, 65536), masks, warps);
      CHECK(first_difference(gpu.first, cpu.first) == -1);
      CHECK(first_difference(gpu.second, cpu.second) == -1);
    }
}
