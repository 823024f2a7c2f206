// Activation forward / backward on the CPU: fp32 through the typed passes of
// typed_passes.h (OpenMP, one vectorized loop per activation kind).
#include <cstring>

#include "backend/cpu/typed_passes.h"
#include "backend/device_ops.h"

namespace trainer::cpu {

void activation_forward(const Device&, Activation a, float* y, size_t n) {
  typed_activation_forward(a, DType::F32, y, n);
}

void activation_backward(const Device&, Activation a, const float* v, const float* dy, float* dx, size_t n) {
  if (a.linear()) {
    if (dx != dy) std::memcpy(dx, dy, n * sizeof(float));
    return;
  }
  typed_activation_backward(a, DType::F32, v, dy, DType::F32, dx, n);
}

}  // namespace trainer::cpu
