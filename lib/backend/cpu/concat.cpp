// Channel concatenation and its inverse on the CPU (OpenMP over pixels), for
// either activation type (a pixel's channels are copied as bytes).
#include <cstring>

#include "backend/device_ops.h"

namespace trainer::cpu {

void concat_channels_forward(const Device&, DType t, const void* const* xv, const int* cs, size_t k, long long P,
                             void* yv, int cy) {
  const size_t e = dtype_size(t);
  const char* const* xs = reinterpret_cast<const char* const*>(xv);
  char* y = static_cast<char*>(yv);
#pragma omp parallel for schedule(static)
  for (long long p = 0; p < P; ++p) {
    char* dst = y + size_t(p) * size_t(cy) * e;
    for (size_t i = 0; i < k; ++i) {
      const size_t bytes = size_t(cs[i]) * e;
      std::memcpy(dst, xs[i] + size_t(p) * bytes, bytes);
      dst += bytes;
    }
  }
}

void concat_channels_backward(const Device&, DType t, const void* dyv, int cy, long long P, const int* cs, size_t k,
                              void* const* dxv) {
  const size_t e = dtype_size(t);
  const char* dy = static_cast<const char*>(dyv);
  char* const* dxs = reinterpret_cast<char* const*>(dxv);
#pragma omp parallel for schedule(static)
  for (long long p = 0; p < P; ++p) {
    const char* src = dy + size_t(p) * size_t(cy) * e;
    for (size_t i = 0; i < k; ++i) {
      const size_t bytes = size_t(cs[i]) * e;
      if (dxs[i]) std::memcpy(dxs[i] + size_t(p) * bytes, src, bytes);
      src += bytes;
    }
  }
}

}  // namespace trainer::cpu
