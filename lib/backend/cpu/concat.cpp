// Channel concatenation and its inverse on the CPU (OpenMP over pixels).
#include <cstring>

#include "backend/device_ops.h"

namespace trainer::cpu {

void concat_channels_forward(const Device&, DType t, const void* const* xv, const int* cs, size_t k, long long P,
                             void* yv, int cy) {
  require_f32(t, "Concatenate on the CPU");
  const float* const* xs = reinterpret_cast<const float* const*>(xv);
  float* y = static_cast<float*>(yv);
#pragma omp parallel for schedule(static)
  for (long long p = 0; p < P; ++p) {
    float* dst = y + p * cy;
    for (size_t i = 0; i < k; ++i) {
      const int c = cs[i];
      std::memcpy(dst, xs[i] + p * c, size_t(c) * sizeof(float));
      dst += c;
    }
  }
}

void concat_channels_backward(const Device&, DType t, const void* dyv, int cy, long long P, const int* cs, size_t k,
                              void* const* dxv) {
  require_f32(t, "Concatenate on the CPU");
  const float* dy = static_cast<const float*>(dyv);
  float* const* dxs = reinterpret_cast<float* const*>(dxv);
#pragma omp parallel for schedule(static)
  for (long long p = 0; p < P; ++p) {
    const float* src = dy + p * cy;
    for (size_t i = 0; i < k; ++i) {
      const int c = cs[i];
      if (dxs[i]) std::memcpy(dxs[i] + p * c, src, size_t(c) * sizeof(float));
      src += c;
    }
  }
}

}  // namespace trainer::cpu
