// Nearest-neighbour UpSampling2D forward / backward on the CPU (OpenMP over rows).
#include <cstring>

#include "backend/device_ops.h"

namespace trainer::cpu {

void upsample_nearest_forward(const Device&, const float* x, Shape s, UpSample2DParams p, float* y) {
  const int sh = p.sh, sw = p.sw, oh = s.h * sh, ow = s.w * sw, c = s.c;
  const long long rows = (long long)s.n * oh;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const long long n = r / oh, i = r % oh;
    const float* src = x + ((n * s.h + i / sh) * s.w) * c;
    float* dst = y + r * ow * c;
    for (int j = 0; j < s.w; ++j)
      for (int k = 0; k < sw; ++k)
        std::memcpy(dst + (size_t(j) * sw + k) * c, src + size_t(j) * c, c * sizeof(float));
  }
}

void upsample_nearest_backward(const Device&, const float* dy, Shape s, UpSample2DParams p, float* dx) {
  const int sh = p.sh, sw = p.sw, ow = s.w * sw, c = s.c;
  const long long rows = (long long)s.n * s.h;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {
    float* dst = dx + r * s.w * c;
    std::memset(dst, 0, size_t(s.w) * c * sizeof(float));
    const long long n = r / s.h, i = r % s.h;
    for (int a = 0; a < sh; ++a) {
      const float* src = dy + ((n * s.h + i) * sh + a) * ow * c;
      for (int j = 0; j < s.w; ++j)
        for (int b = 0; b < sw; ++b) {
          const float* sp = src + (size_t(j) * sw + b) * c;
          float* dp = dst + size_t(j) * c;
#pragma omp simd
          for (int k = 0; k < c; ++k) dp[k] += sp[k];
        }
    }
  }
}

}  // namespace trainer::cpu
