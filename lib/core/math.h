#pragma once
// Scalar math shared by CPU loops and CUDA kernels: TRAINER_HD expands
// to __host__ __device__ under nvcc.
#include <cmath>

#if defined(__CUDACC__)
#define TRAINER_HD __host__ __device__
#else
#define TRAINER_HD
#endif

namespace trainer {

/// Logistic function 1 / (1 + exp(-z)) without overflow for large |z|.
TRAINER_HD inline float stable_sigmoid(float z) {
  if (z >= 0.f) return 1.f / (1.f + expf(-z));
  const float e = expf(z);
  return e / (1.f + e);
}

}  // namespace trainer
