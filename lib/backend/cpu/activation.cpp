// Activation forward / backward on the CPU (OpenMP), per element through
// backend/elementwise_math.h, one loop per activation kind (with_kind).
#include <cstring>

#include "backend/device_ops.h"

namespace trainer::cpu {

void activation_forward(const Device&, Activation a, float* y, size_t n) {
  if (a.linear()) return;
  const long long m = (long long)n;
  with_kind(a.kind, [&](auto k) {
    const Activation f{k, a.alpha, a.beta};
#pragma omp parallel for simd schedule(static)
    for (long long i = 0; i < m; ++i) y[i] = activation_value(f, y[i]);
  });
}

void activation_backward(const Device&, Activation a, const float* v, const float* dy, float* dx, size_t n) {
  if (a.linear()) {
    if (dx != dy) std::memcpy(dx, dy, n * sizeof(float));
    return;
  }
  const long long m = (long long)n;
  with_kind(a.kind, [&](auto k) {
    const Activation f{k, a.alpha, a.beta};
#pragma omp parallel for simd schedule(static)
    for (long long i = 0; i < m; ++i) dx[i] = activation_dx(f, v[i], dy[i]);
  });
}

}  // namespace trainer::cpu
