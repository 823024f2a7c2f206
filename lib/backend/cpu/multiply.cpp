// Multiply (element-wise product of two tensors, the second one optionally
// one channel broadcast over all) and its gradients on the CPU (OpenMP over
// pixels).
#include "backend/device_ops.h"

namespace trainer::cpu {

void multiply_forward(const Device&, const float* a, const float* b, int cb, long long P, int C, float* y) {
  const bool broadcast = cb == 1 && C > 1;
#pragma omp parallel for schedule(static)
  for (long long p = 0; p < P; ++p)
    for (int c = 0; c < C; ++c) {
      const long long i = p * C + c;
      y[i] = a[i] * b[broadcast ? p : i];
    }
}

void multiply_backward(const Device&, const float* a, const float* b, int cb, long long P, int C, const float* dy,
                       float* da, float* db) {
  const bool broadcast = cb == 1 && C > 1;
#pragma omp parallel for schedule(static)
  for (long long p = 0; p < P; ++p) {
    float sum = 0.f;
    for (int c = 0; c < C; ++c) {
      const long long i = p * C + c;
      if (da) da[i] = dy[i] * b[broadcast ? p : i];
      if (db && !broadcast) db[i] = dy[i] * a[i];
      if (db && broadcast) sum += dy[i] * a[i];
    }
    if (db && broadcast) db[p] = sum;
  }
}

}  // namespace trainer::cpu
