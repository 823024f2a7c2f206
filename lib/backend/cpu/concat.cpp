// Channel concatenation and its inverse on the CPU (OpenMP over pixels).
#include <cstring>

#include "backend/device_ops.h"

namespace trainer::cpu {

// fp32 only, as every CPU op (InternalError otherwise).
void concat_channels_forward(const Device&, DType t, const void* const* xs, const int* cs, size_t k, long long P,
                             void* y, int cy) {
  require_f32(t, "Concatenate on the CPU");
  const size_t e = dtype_size(t);
#pragma omp parallel for schedule(static)
  for (long long p = 0; p < P; ++p) {
    char* dst = static_cast<char*>(y) + size_t(p) * cy * e;
    for (size_t i = 0; i < k; ++i) {
      const size_t row = size_t(cs[i]) * e;
      std::memcpy(dst, static_cast<const char*>(xs[i]) + size_t(p) * row, row);
      dst += row;
    }
  }
}

void concat_channels_backward(const Device&, DType t, const void* dy, int cy, long long P, const int* cs, size_t k,
                              void* const* dxs) {
  require_f32(t, "Concatenate on the CPU");
  const size_t e = dtype_size(t);
#pragma omp parallel for schedule(static)
  for (long long p = 0; p < P; ++p) {
    const char* src = static_cast<const char*>(dy) + size_t(p) * cy * e;
    for (size_t i = 0; i < k; ++i) {
      const size_t row = size_t(cs[i]) * e;
      if (dxs[i]) std::memcpy(static_cast<char*>(dxs[i]) + size_t(p) * row, src, row);
      src += row;
    }
  }
}

}  // namespace trainer::cpu
