#pragma once
// Shape of an NHWC tensor: [N, H, W, C]. Every activation in trainer is 4-D and
// channels-last, as in Keras and OpenCV. Per-sample shapes (what a layer's
// shape inference sees) use n = 0 or 1 and are printed as [H, W, C].
#include <cstddef>
#include <string>

#include "core/error.h"

namespace trainer {

struct Shape {
  int n = 0, h = 0, w = 0, c = 0;

  /// Number of elements, n*h*w*c.
  size_t numel() const { return size_t(n) * size_t(h) * size_t(w) * size_t(c); }
  /// Elements of one sample, h*w*c.
  size_t sample_numel() const { return size_t(h) * size_t(w) * size_t(c); }
  /// The same shape with another batch size.
  Shape with_batch(int batch) const { return Shape{batch, h, w, c}; }
  bool same_sample(const Shape& o) const { return h == o.h && w == o.w && c == o.c; }
  bool operator==(const Shape& o) const { return n == o.n && same_sample(o); }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  /// "[H, W, C]" (the per-sample form Keras prints, batch omitted).
  std::string hwc() const {
    return "[" + std::to_string(h) + ", " + std::to_string(w) + ", " + std::to_string(c) + "]";
  }
  /// "[N, H, W, C]".
  std::string nhwc() const {
    return "[" + std::to_string(n) + ", " + std::to_string(h) + ", " + std::to_string(w) + ", " +
           std::to_string(c) + "]";
  }
};

/// Largest height or width (pixels) a layer may produce.
constexpr long long kMaxSide = 1 << 20;

/// v as an int; throws UserError when v is outside [0, kMaxSide] (shape
/// inference computes sizes in 64 bits and checks them here, so a huge
/// kernel, stride or upsampling factor is an error, not an overflow).
inline int checked_side(long long v) {
  if (v < 0 || v > kMaxSide)
    throw UserError("the output would be " + std::to_string(v) + " pixels high or wide (at most " +
                    std::to_string(kMaxSide) + "); use a smaller input, stride or upsampling size");
  return int(v);
}

}  // namespace trainer
