// The metrics' logit histogram on the CPU (one OpenMP pass with an array
// reduction), the bin of each value through backend/train_math.h.
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cpu {

void logit_histogram(const Device&, const float* z, const float* y, size_t n, const float* thr_host,
                     int64_t* hist_host) {
  constexpr int T = kLogitThresholds, B = T + 1;
  float thr[T];
  for (int t = 0; t < T; ++t) thr[t] = thr_host[t];
  int64_t hist[2 * B] = {};
#pragma omp parallel for reduction(+ : hist[:2 * B]) schedule(static)
  for (size_t i = 0; i < n; ++i) hist[(y[i] > 0.5f) * B + logit_bin(z[i], thr, T)] += 1;
  for (int k = 0; k < 2 * B; ++k) hist_host[k] += hist[k];
}

}  // namespace trainer::cpu
