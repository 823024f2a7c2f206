// Activation forward / backward on the CPU (OpenMP), per element through
// backend/elementwise_math.h.
#include <cstring>

#include "backend/device_ops.h"

namespace trainer::cpu {

void activation_forward(const Device&, Activation a, float* y, size_t n) {
  const long long m = (long long)n;
  switch (a) {
    case Activation::Linear:
      return;
    case Activation::Relu:
#pragma omp parallel for simd schedule(static)
      for (long long i = 0; i < m; ++i) y[i] = relu_forward(y[i]);
      return;
    case Activation::Sigmoid:
#pragma omp parallel for schedule(static)
      for (long long i = 0; i < m; ++i) y[i] = sigmoid_forward(y[i]);
      return;
  }
}

void activation_backward(const Device&, Activation a, const float* y, const float* dy, float* dx, size_t n) {
  const long long m = (long long)n;
  switch (a) {
    case Activation::Linear:
      if (dx != dy) std::memcpy(dx, dy, n * sizeof(float));
      return;
    case Activation::Relu:
#pragma omp parallel for simd schedule(static)
      for (long long i = 0; i < m; ++i) dx[i] = relu_backward(y[i], dy[i]);
      return;
    case Activation::Sigmoid:
#pragma omp parallel for simd schedule(static)
      for (long long i = 0; i < m; ++i) dx[i] = sigmoid_backward(y[i], dy[i]);
      return;
  }
}

}  // namespace trainer::cpu
