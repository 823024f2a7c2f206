// Rescaling forward / backward on the CPU (OpenMP).
#include "backend/device_ops.h"

namespace trainer::cpu {

void scale_shift_forward(const Device&, const float* x, float scale, float offset, float* y, size_t n) {
  const long long m = (long long)n;
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) y[i] = scale_shift(x[i], scale, offset);
}

void scale_backward(const Device&, const float* dy, float scale, float* dx, size_t n) {
  const long long m = (long long)n;
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) dx[i] = dy[i] * scale;
}

}  // namespace trainer::cpu
