// augment_batch on the CPU (OpenMP over the batch's rows), per pixel
// through backend/augment_math.h. CPU towers augment with OpenCV instead
// (data/training_sample.h); this is the reference the GPU kernel is tested against.
#include "backend/device_ops.h"

namespace trainer::cpu {

namespace {

/// Output row y of sample k.
template <class T, class M>
void augment_row(const AugmentBatch& b, int k, int y) {
  const SampleWarp& s = b.warps[k];
  const size_t plane = size_t(b.h) * size_t(b.w);
  const T* image = static_cast<const T*>(b.images) + size_t(k) * plane * size_t(b.c);
  float* out = b.image_out + (size_t(k) * plane + size_t(y) * size_t(b.w)) * size_t(b.c);
  for (int x = 0; x < b.w; ++x) {
    int sx, sy;
    warp_source(s, x, y, sx, sy);
    for (int ch = 0; ch < b.c; ++ch)
      out[size_t(x) * size_t(b.c) + size_t(ch)] =
          model_value(bilinear_value(image, b.h, b.w, b.c, ch, sx, sy, b.fill, b.cval), s);
  }
  if (!b.masks) return;
  const M* mask = static_cast<const M*>(b.masks) + size_t(k) * plane;
  float* mask_out = b.mask_out + size_t(k) * plane + size_t(y) * size_t(b.w);
  for (int x = 0; x < b.w; ++x) mask_out[x] = nearest_mask_value(mask, b.h, b.w, s, x, y, b.fill);
}

template <class T, class M>
void augment_rows(const AugmentBatch& b) {
  const long long rows = (long long)b.n * b.h;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) augment_row<T, M>(b, int(r / b.h), int(r % b.h));
}

template <class T>
void augment_with_masks(const AugmentBatch& b) {
  if (b.masks && b.mask_bytes == 2) return augment_rows<T, uint16_t>(b);
  augment_rows<T, uint8_t>(b);
}

}  // namespace

void augment_batch(const Device&, const AugmentBatch& b) {
  require_held_bytes(b);
  if (b.pixel_bytes == 2) return augment_with_masks<uint16_t>(b);
  augment_with_masks<uint8_t>(b);
}

}  // namespace trainer::cpu
