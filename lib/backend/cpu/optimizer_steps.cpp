// Optimizer updates on the CPU (OpenMP over the parameters), per element
// through backend/train_math.h.
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cpu {

void sgd_step(const Device&, const OptimizerArrays& a, SgdParams p) {
  const long long m = (long long)a.n;
  float* w = a.w;
  const float* g = a.g;
  if (!a.momentum) {
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < m; ++i) w[i] -= p.lr * g[i];
    return;
  }
  float* velocity = a.momentum;
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < m; ++i) sgd_momentum_update(w[i], velocity[i], g[i], p.lr, p.momentum, p.nesterov);
}

void adam_step(const Device&, const OptimizerArrays& a, AdamParams p) {
  const long long k = (long long)a.n;
  float *w = a.w, *m = a.m, *v = a.v, *v_hat = a.v_hat;
  const float* g = a.g;
  if (v_hat) {
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < k; ++i)
      amsgrad_update(w[i], m[i], v[i], v_hat[i], g[i], p.lr_t, p.beta_1, p.beta_2, p.epsilon);
    return;
  }
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < k; ++i) adam_update(w[i], m[i], v[i], g[i], p.lr_t, p.beta_1, p.beta_2, p.epsilon);
}

void rmsprop_step(const Device&, const OptimizerArrays& a, RmspropParams p) {
  const long long m = (long long)a.n;
  float *w = a.w, *rms = a.rms, *mg = a.mg, *mom = a.momentum;
  const float* g = a.g;
  if (!mom) {
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < m; ++i) rmsprop_update(w[i], rms[i], mg ? mg + i : nullptr, g[i], p.lr, p.rho, p.epsilon);
    return;
  }
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < m; ++i)
    rmsprop_momentum_update(w[i], rms[i], mg ? mg + i : nullptr, mom[i], g[i], p.lr, p.rho, p.momentum, p.epsilon);
}

}  // namespace trainer::cpu
