// Add (element-wise sum of k tensors) and gradient accumulation on the CPU (OpenMP).
#include "backend/device_ops.h"

namespace trainer::cpu {

void add_forward(const Device&, const float* const* xs, size_t k, float* y, size_t n) {
  const long long m = (long long)n;
  const float* a = xs[0];
  const float* b = xs[1];
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) y[i] = a[i] + b[i];
  for (size_t j = 2; j < k; ++j) {
    const float* c = xs[j];
#pragma omp parallel for simd schedule(static)
    for (long long i = 0; i < m; ++i) y[i] += c[i];
  }
}

void accumulate(const Device&, float* y, const float* x, size_t n) {
  const long long m = (long long)n;
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) y[i] += x[i];
}

}  // namespace trainer::cpu
