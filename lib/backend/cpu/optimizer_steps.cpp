// Optimizer updates on the CPU (OpenMP over the parameters), per element
// through backend/train_math.h.
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cpu {

void sgd_step(const Device&, float* w, const float* g, size_t n, float lr) {
  const long long m = (long long)n;
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < m; ++i) w[i] -= lr * g[i];
}

void sgd_momentum_step(const Device&, float* w, float* velocity, const float* g, size_t n, float lr,
                       float momentum, bool nesterov) {
  const long long m = (long long)n;
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < m; ++i) sgd_momentum_update(w[i], velocity[i], g[i], lr, momentum, nesterov);
}

void adam_step(const Device&, float* w, float* m, float* v, float* v_hat, const float* g, size_t n, float lr_t,
               float b1, float b2, float epsilon) {
  const long long k = (long long)n;
  if (v_hat) {
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < k; ++i) amsgrad_update(w[i], m[i], v[i], v_hat[i], g[i], lr_t, b1, b2, epsilon);
    return;
  }
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < k; ++i) adam_update(w[i], m[i], v[i], g[i], lr_t, b1, b2, epsilon);
}

void rmsprop_step(const Device&, float* w, float* rms, float* mg, const float* g, size_t n, float lr, float rho,
                  float epsilon) {
  const long long m = (long long)n;
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < m; ++i) rmsprop_update(w[i], rms[i], mg ? mg + i : nullptr, g[i], lr, rho, epsilon);
}

void rmsprop_momentum_step(const Device&, float* w, float* rms, float* mg, float* mom, const float* g, size_t n,
                           float lr, float rho, float momentum, float epsilon) {
  const long long m = (long long)n;
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < m; ++i)
    rmsprop_momentum_update(w[i], rms[i], mg ? mg + i : nullptr, mom[i], g[i], lr, rho, momentum, epsilon);
}

}  // namespace trainer::cpu
