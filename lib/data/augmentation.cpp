#include "data/augmentation.h"

#include <opencv2/core.hpp>

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/elementwise_math.h"
#include "core/error.h"

namespace trainer {

namespace {

constexpr Symmetry kFlipX = 1, kFlipY = 2, kTranspose = 4;
/// Separates the augmentation stream from Dropout's, which mixes the same seed and step.
constexpr uint64_t kAugmentationSalt = 0x6175676d656e7421ULL;  // "augment!"

}  // namespace

uint64_t sample_key(uint64_t seed, uint64_t salt, uint64_t step, uint64_t position) {
  return mix64(mix64(mix64(mix64(seed) ^ salt) ^ step) ^ position);
}

int allowed_symmetries(const AugmentationConfig& cfg, Symmetry out[8]) {
  int n = 0;
  const bool any_flip = cfg.horizontal_flip || cfg.vertical_flip;
  for (Symmetry s = 0; s < 8; ++s) {
    const bool fx = s & kFlipX, fy = s & kFlipY, tr = s & kTranspose;
    // A quarter turn is a transpose with one flip; a transpose alone or with
    // both flips is a mirror across a diagonal, reached only with a flip too.
    const bool rotation = tr ? fx != fy : fx == fy;
    bool ok;
    if (cfg.rotate_90) ok = any_flip || rotation;
    else ok = !tr && (!fx || cfg.horizontal_flip) && (!fy || cfg.vertical_flip);
    if (ok) out[n++] = s;
  }
  return n;
}

Symmetry draw_symmetry(const AugmentationConfig& cfg, uint64_t seed, uint64_t step, uint64_t position) {
  Symmetry allowed[8];
  const int n = allowed_symmetries(cfg, allowed);
  const uint64_t key = sample_key(seed, kAugmentationSalt, step, position);
  return allowed[(key >> 32) % uint64_t(n)];
}

Symmetry inverse_symmetry(Symmetry s) {
  if (!(s & kTranspose)) return s;
  return kTranspose | ((s & kFlipX) ? kFlipY : 0u) | ((s & kFlipY) ? kFlipX : 0u);
}

namespace {

/// OpenCV's flip code for a symmetry's flips (1: left-right, 0: up-down, -1: both).
int flip_code(Symmetry s) { return (s & kFlipX) && (s & kFlipY) ? -1 : (s & kFlipX) ? 1 : 0; }

/// Whether cv::transpose takes pixels of this many bytes (its element sizes).
bool transposable(size_t bytes) {
  for (size_t b : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32})
    if (bytes == b) return true;
  return false;
}

}  // namespace

void apply_symmetry(Symmetry s, const cv::Mat& src, cv::Mat& dst) {
  const int h = src.rows, w = src.cols;
  if ((s & kTranspose) && h != w)
    throw InternalError("a transposing symmetry of a " + std::to_string(h) + "x" + std::to_string(w) + " sample");
  dst.create(h, w, src.type());
  if (s == 0) return src.copyTo(dst);
  // OpenCV's flip and transpose move rows and pixels with SIMD copies; dst = flip(transpose(src)).
  if (!(s & kTranspose)) return cv::flip(src, dst, flip_code(s));
  const size_t px = src.elemSize();
  if (transposable(px)) {
    cv::transpose(src, dst);
    if (s & (kFlipX | kFlipY)) cv::flip(dst, dst, flip_code(s));
    return;
  }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const int sy = (s & kFlipY) ? h - 1 - y : y, sx = (s & kFlipX) ? w - 1 - x : x;
      std::memcpy(dst.ptr(y, x), src.ptr(sx, sy), px);  // transposed: row sx, column sy
    }
}

void apply_symmetry(Symmetry s, const float* src, float* dst, int h, int w, int c) {
  cv::Mat to(h, w, CV_32FC(c), dst);
  apply_symmetry(s, cv::Mat(h, w, CV_32FC(c), const_cast<float*>(src)), to);
}

std::array<double, 6> symmetry_matrix(Symmetry s, int h, int w) {
  if ((s & kTranspose) && h != w)
    throw InternalError("a transposing symmetry of a " + std::to_string(h) + "x" + std::to_string(w) + " sample");
  // Flips first: x' = w - 1 - x, y' = h - 1 - y; then a transpose reads row x', column y'.
  const std::array<double, 3> fx = (s & kFlipX) ? std::array<double, 3>{-1, 0, w - 1.0} : std::array<double, 3>{1, 0, 0};
  const std::array<double, 3> fy = (s & kFlipY) ? std::array<double, 3>{0, -1, h - 1.0} : std::array<double, 3>{0, 1, 0};
  const auto& col = (s & kTranspose) ? fy : fx;  // the source column's row of the matrix
  const auto& row = (s & kTranspose) ? fx : fy;
  return {col[0], col[1], col[2], row[0], row[1], row[2]};
}

}  // namespace trainer
