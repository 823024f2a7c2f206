// The binary focal cross-entropy's sum and gradient (and the binary
// cross-entropy's with label smoothing) on the CPU (OpenMP over the values),
// per value through backend/train_math.h.
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cpu {

void sigmoid_focal_sum(const Device&, const float* z, const float* y, size_t n, CrossEntropyForm f,
                       double* sum_host) {
  double sum = 0;
  const long long m = (long long)n;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (long long i = 0; i < m; ++i) sum += trainer::sigmoid_focal_loss(z[i], y[i], f);
  *sum_host = sum;
}

void sigmoid_focal_grad(const Device&, const float* z, const float* y, size_t n, CrossEntropyForm f, float scale,
                        float* g) {
  const long long m = (long long)n;
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < m; ++i) g[i] = scale * trainer::sigmoid_focal_grad(z[i], y[i], f);
}

}  // namespace trainer::cpu
