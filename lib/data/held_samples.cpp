#include "data/held_samples.h"

#include <opencv2/core.hpp>

#include <cstdint>
#include <cstring>
#include <limits>

#include "core/class_mask.h"
#include "core/error.h"
#include "data/image_decode.h"

namespace trainer {

namespace {

/// Mask values of storage type T, the largest marking an ignored pixel.
template <class T>
void mask_to_float(const T* in, size_t n, float* out) {
  const T ignored = std::numeric_limits<T>::max();
  for (size_t k = 0; k < n; ++k) out[k] = in[k] == ignored ? kIgnoredPixel : float(in[k]);
}

template <class T>
void float_to_mask(const float* in, size_t n, T* out) {
  const T ignored = std::numeric_limits<T>::max();
  for (size_t k = 0; k < n; ++k) out[k] = in[k] == kIgnoredPixel ? ignored : T(in[k]);
}

}  // namespace

DType mask_storage(int classes) { return classes <= 255 ? DType::U8 : DType::U16; }

void image_sample_to_float(const Tensor& images, int i, float* out) {
  const Shape s = images.shape();
  switch (images.dtype()) {
    case DType::F32:
      return void(std::memcpy(out, images.raw_sample(i), images.sample_bytes()));
    case DType::U8:
    case DType::U16: {
      const int type = images.dtype() == DType::U8 ? CV_8UC(s.c) : CV_16UC(s.c);
      return pixels_to_float(cv::Mat(s.h, s.w, type, const_cast<void*>(images.raw_sample(i))), out);
    }
    case DType::BF16:
      break;
  }
  throw InternalError("images held as bf16");
}

void mask_sample_to_float(const Tensor& masks, int i, float* out) {
  const size_t n = masks.shape().sample_numel();
  switch (masks.dtype()) {
    case DType::F32:
      return void(std::memcpy(out, masks.raw_sample(i), masks.sample_bytes()));
    case DType::U8:
      return mask_to_float(static_cast<const uint8_t*>(masks.raw_sample(i)), n, out);
    case DType::U16:
      return mask_to_float(static_cast<const uint16_t*>(masks.raw_sample(i)), n, out);
    case DType::BF16:
      break;
  }
  throw InternalError("masks held as bf16");
}

void store_mask_sample(const float* values, Tensor& masks, int i) {
  const size_t n = masks.shape().sample_numel();
  if (masks.dtype() == DType::U8) return float_to_mask(values, n, static_cast<uint8_t*>(masks.raw_sample(i)));
  if (masks.dtype() == DType::U16) return float_to_mask(values, n, static_cast<uint16_t*>(masks.raw_sample(i)));
  throw InternalError(std::string("masks held as ") + dtype_name(masks.dtype()));
}

}  // namespace trainer
