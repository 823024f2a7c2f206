#include "backend/cpu/blocked_relu_gradient.h"

#include "backend/elementwise_math.h"

namespace trainer::cpu {

void relu_gradient_to_nchw16c(const float* y, const float* dy, Shape s, float* dz) {
  constexpr long long kBlock = 16;
  const long long pixels = (long long)s.h * s.w, blocks = s.c / kBlock, rows = (long long)s.n * pixels;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {  // r = n * pixels + p: one pixel's C channels
    const long long n = r / pixels, p = r % pixels;
    const float* __restrict yr = y + r * s.c;
    const float* __restrict dyr = dy + r * s.c;
    for (long long b = 0; b < blocks; ++b) {
      float* __restrict out = dz + ((n * blocks + b) * pixels + p) * kBlock;
      for (long long j = 0; j < kBlock; ++j) out[j] = relu_backward(yr[b * kBlock + j], dyr[b * kBlock + j]);
    }
  }
}

}  // namespace trainer::cpu
