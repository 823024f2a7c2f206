#include "data/held_samples.h"

#include <opencv2/core.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "core/class_mask.h"
#include "core/error.h"

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

cv::Mat held_sample(const Tensor& held, int i) {
  const Shape s = held.shape();
  int depth = CV_32F;
  switch (held.dtype()) {
    case DType::F32: break;
    case DType::U8: depth = CV_8U; break;
    case DType::U16: depth = CV_16U; break;
    case DType::BF16: throw InternalError("samples held as bf16");
  }
  return cv::Mat(s.h, s.w, CV_MAKETYPE(depth, s.c), const_cast<void*>(held.raw_sample(i)));
}

void held_pixels_to_float(const cv::Mat& pixels, float brightness, float* out) {
  const double unit = pixels.depth() == CV_16U ? 255.0 / 65535.0 : 1.0;
  cv::Mat to(pixels.rows, pixels.cols, CV_32FC(pixels.channels()), out);  // writes into out
  pixels.convertTo(to, CV_32F, unit * brightness);
  if (brightness == 1) return;
  const size_t n = to.total() * size_t(to.channels());
  // min(max()) rather than std::clamp, whose branches keep the loop from vectorizing (the same values).
  for (size_t k = 0; k < n; ++k) out[k] = std::min(std::max(out[k], 0.f), 255.f);
}

void held_mask_to_float(const cv::Mat& mask, float* out) {
  const size_t n = mask.total() * size_t(mask.channels());
  switch (mask.depth()) {
    case CV_8U: return mask_to_float(mask.ptr<uint8_t>(), n, out);
    case CV_16U: return mask_to_float(mask.ptr<uint16_t>(), n, out);
    case CV_32F: return void(std::memcpy(out, mask.ptr<float>(), n * sizeof(float)));
  }
  throw InternalError("masks held as OpenCV depth " + std::to_string(mask.depth()));
}

void mask_sample_to_float(const Tensor& masks, int i, float* out) { held_mask_to_float(held_sample(masks, i), out); }

void store_mask(const float* values, cv::Mat& mask) {
  if (mask.depth() == CV_8U) return float_to_mask(values, mask.total(), mask.ptr<uint8_t>());
  if (mask.depth() == CV_16U) return float_to_mask(values, mask.total(), mask.ptr<uint16_t>());
  throw InternalError("masks held as OpenCV depth " + std::to_string(mask.depth()));
}

void store_mask_sample(const float* values, Tensor& masks, int i) {
  const size_t n = masks.shape().sample_numel();
  if (masks.dtype() == DType::U8) return float_to_mask(values, n, static_cast<uint8_t*>(masks.raw_sample(i)));
  if (masks.dtype() == DType::U16) return float_to_mask(values, n, static_cast<uint16_t*>(masks.raw_sample(i)));
  throw InternalError(std::string("masks held as ") + dtype_name(masks.dtype()));
}

}  // namespace trainer
