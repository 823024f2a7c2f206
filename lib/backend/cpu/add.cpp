// Add (element-wise sum of k tensors) on the CPU (OpenMP).
#include "backend/elementwise_ops.h"

namespace trainer {

void add_forward(const float* const* xs, size_t k, float* y, size_t n) {
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

}  // namespace trainer
