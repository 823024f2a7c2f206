#pragma once
// The per-pixel math of turning a held training sample (8- or 16-bit
// pixels, data/held_samples.h) into the model's input, augmented: each
// output pixel samples the source point of the sample's map (the form of
// data/affine_augmentation.h's affine_matrix, composed with a flip or
// quarter turn: data/augmentation.h's symmetry_matrix), which is rounded to
// 1/32 pixel as OpenCV's warpAffine rounds it; the image bilinearly, the mask
// by nearest neighbour, outside the image as the config's fill_mode says;
// then the image values are scaled to model units times the brightness
// factor. Written once for the CPU and the CUDA implementations of the
// backend op augment_batch (train_ops.inc); the tests hold it against the
// OpenCV path of the CPU towers (data/training_sample.h). That path rounds a
// source point to 1/1024 pixel before rounding it to 1/32, so where that
// moves it to the next 1/32 the two differ by up to a neighbour difference
// over 32 (and by one unit where a 16-bit value rounds an exact half).
#include <cstdint>
#include <string>

#include "core/class_mask.h"
#include "core/error.h"
#include "core/math.h"

namespace trainer {

/// Where a source point outside the image reads (AugmentationConfig::fill_mode,
/// as OpenCV's border of that name): Constant: the fill value; Nearest: the
/// edge pixel (OpenCV's BORDER_REPLICATE); Reflect: d c b a | a b c d
/// (BORDER_REFLECT); Wrap: a b c d | a b c d (BORDER_WRAP).
enum class WarpFill : int { Constant = 0, Nearest = 1, Reflect = 2, Wrap = 3 };

/// Subpixel steps a source coordinate is rounded to (OpenCV's INTER_TAB_SIZE).
inline constexpr int kWarpSubpixels = 32;

/// One sample's transform. Output pixel (x, y) samples the source point
/// (m0 x + m1 y + m2, m3 x + m4 y + m5); image values are then multiplied by
/// scale (model units per held unit times the brightness factor) and, with
/// clamp, limited to [0, 255] (as brightness_range's values are).
struct SampleWarp {
  float m[6] = {1, 0, 0, 0, 1, 0};
  float scale = 1;
  int clamp = 0;
};

/// What the backend op augment_batch reads and writes, all on its device
/// but where noted. Shapes: images [n, h, w, c] and masks [n, h, w, 1] of
/// held values (pixel_bytes / mask_bytes 1: uint8, 2: uint16); outputs
/// image_out [n, h, w, c] and mask_out [n, h, w, 1], fp32.
struct AugmentBatch {
  int n = 0, h = 0, w = 0, c = 0;
  const void* images = nullptr;
  int pixel_bytes = 1;
  const void* masks = nullptr;   ///< nullptr: no masks (mask_out is not written).
  int mask_bytes = 1;
  const SampleWarp* warps = nullptr;  ///< [n], one per sample.
  WarpFill fill = WarpFill::Nearest;
  float cval = 0;  ///< The image's fill value under WarpFill::Constant, a held value (a whole number in range).
  float* image_out = nullptr;
  float* mask_out = nullptr;
};

/// InternalError unless b's held pixels and masks are of 1 or 2 bytes (augment_batch's types).
inline void require_held_bytes(const AugmentBatch& b) {
  if ((b.pixel_bytes != 1 && b.pixel_bytes != 2) || (b.masks && b.mask_bytes != 1 && b.mask_bytes != 2))
    throw InternalError("augment_batch: held pixels of " + std::to_string(b.pixel_bytes) + " and masks of " +
                        std::to_string(b.mask_bytes) + " bytes");
}

/// OpenCV's borderInterpolate: the index that position p of a line of n
/// pixels reads under fill, or -1 (WarpFill::Constant, outside).
TRAINER_HD inline int fill_index(int p, int n, WarpFill fill) {
  if (p >= 0 && p < n) return p;
  switch (fill) {
    case WarpFill::Constant: return -1;
    case WarpFill::Nearest: return p < 0 ? 0 : n - 1;
    case WarpFill::Wrap: {
      const int r = p % n;
      return r < 0 ? r + n : r;
    }
    case WarpFill::Reflect: break;
  }
  const int period = 2 * n, r = ((p % period) + period) % period;
  return r < n ? r : period - 1 - r;
}

/// The source point of output pixel (x, y) under s, in 1/kWarpSubpixels
/// pixels, rounded to nearest. Fused multiply-adds, so that every device
/// computes the same bits.
TRAINER_HD inline void warp_source(const SampleWarp& s, int x, int y, int& sx, int& sy) {
  const float fx = fmaf(s.m[0], float(x), fmaf(s.m[1], float(y), s.m[2]));
  const float fy = fmaf(s.m[3], float(x), fmaf(s.m[4], float(y), s.m[5]));
  sx = int(floorf(fx * kWarpSubpixels + 0.5f));
  sy = int(floorf(fy * kWarpSubpixels + 0.5f));
}

/// Floor division of a subpixel coordinate by kWarpSubpixels (the pixel) and its remainder (the step).
TRAINER_HD inline void split_subpixel(int s, int& pixel, int& step) {
  pixel = s >= 0 ? s / kWarpSubpixels : -((-s + kWarpSubpixels - 1) / kWarpSubpixels);
  step = s - pixel * kWarpSubpixels;
}

/// Channel ch of the image [h, w, c] of held values T bilinearly at the
/// subpixel point (sx, sy) (warp_source), reading cval outside under
/// WarpFill::Constant, rounded to a whole held value as OpenCV rounds
/// integer images.
template <class T>
TRAINER_HD float bilinear_value(const T* image, int h, int w, int c, int ch, int sx, int sy, WarpFill fill,
                                float cval) {
  int x0, y0, fx, fy;
  split_subpixel(sx, x0, fx);
  split_subpixel(sy, y0, fy);
  const float ax = float(fx) / kWarpSubpixels, ay = float(fy) / kWarpSubpixels;
  float v[2][2];
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      const int xi = fill_index(x0 + dx, w, fill), yi = fill_index(y0 + dy, h, fill);
      v[dy][dx] = xi < 0 || yi < 0 ? cval : float(image[(size_t(yi) * size_t(w) + size_t(xi)) * size_t(c) + size_t(ch)]);
    }
  // Each step one rounding (fused multiply-adds), so that every device computes the same bits.
  const float top = fmaf(ax, v[0][1] - v[0][0], v[0][0]), bottom = fmaf(ax, v[1][1] - v[1][0], v[1][0]);
  return floorf(fmaf(ay, bottom - top, top) + 0.5f);
}

/// The mask [h, w] of held values T by nearest neighbour at the source point
/// of output pixel (x, y) (0 outside under WarpFill::Constant), as a mask
/// value: the type's largest value is kIgnoredPixel (data/held_samples.h).
template <class T>
TRAINER_HD float nearest_mask_value(const T* mask, int h, int w, const SampleWarp& s, int x, int y, WarpFill fill) {
  const float fx = fmaf(s.m[0], float(x), fmaf(s.m[1], float(y), s.m[2]));
  const float fy = fmaf(s.m[3], float(x), fmaf(s.m[4], float(y), s.m[5]));
  const int xi = fill_index(int(floorf(fx + 0.5f)), w, fill), yi = fill_index(int(floorf(fy + 0.5f)), h, fill);
  if (xi < 0 || yi < 0) return 0.f;
  const T v = mask[size_t(yi) * size_t(w) + size_t(xi)];
  return v == T(~T(0)) ? kIgnoredPixel : float(v);
}

/// A held image value in model units: value * s.scale, limited to [0, 255] with s.clamp.
TRAINER_HD inline float model_value(float value, const SampleWarp& s) {
  const float v = value * s.scale;
  return s.clamp ? fminf(fmaxf(v, 0.f), 255.f) : v;
}

}  // namespace trainer
