#include "data/augmentation.h"

#include <algorithm>

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

void apply_symmetry(Symmetry s, const float* src, float* dst, int h, int w, int c) {
  if ((s & kTranspose) && h != w)
    throw InternalError("a transposing symmetry of a " + std::to_string(h) + "x" + std::to_string(w) + " sample");
  const size_t row = size_t(w) * size_t(c);
  if (s == 0) {
    std::copy(src, src + size_t(h) * row, dst);
    return;
  }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      int sy = (s & kFlipY) ? h - 1 - y : y, sx = (s & kFlipX) ? w - 1 - x : x;
      if (s & kTranspose) std::swap(sy, sx);
      const float* from = src + size_t(sy) * row + size_t(sx) * size_t(c);
      std::copy(from, from + c, dst + size_t(y) * row + size_t(x) * size_t(c));
    }
}

}  // namespace trainer
