// Bilinear UpSampling2D forward / backward on the CPU (OpenMP over rows),
// every element through backend/elementwise_math.h's bilinear functions in
// the order the CUDA kernels take.
#include <algorithm>
#include <vector>

#include "backend/device_ops.h"

namespace trainer::cpu {

void upsample_bilinear_forward(const Device&, const float* x, Shape s, UpSample2DParams p, float* y) {
  const int oh = s.h * p.sh, ow = s.w * p.sw, C = s.c;
  std::vector<BilinearTap> cols(static_cast<size_t>(ow));
  for (int j = 0; j < ow; ++j) cols[size_t(j)] = bilinear_tap(j, s.w, ow);
  const long long rows = (long long)s.n * oh;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const long long n = r / oh;
    const BilinearTap ty = bilinear_tap(int(r % oh), s.h, oh);
    const float* top = x + (size_t(n) * s.h + ty.lo) * s.w * C;
    const float* bottom = x + (size_t(n) * s.h + ty.hi) * s.w * C;
    float* out = y + size_t(r) * ow * C;
    for (int j = 0; j < ow; ++j) {
      const BilinearTap& tx = cols[size_t(j)];
      for (int c = 0; c < C; ++c) {
        const float t = bilinear_lerp(top[size_t(tx.lo) * C + c], top[size_t(tx.hi) * C + c], tx.frac);
        const float b = bilinear_lerp(bottom[size_t(tx.lo) * C + c], bottom[size_t(tx.hi) * C + c], tx.frac);
        out[size_t(j) * C + c] = bilinear_lerp(t, b, ty.frac);
      }
    }
  }
}

void upsample_bilinear_backward(const Device&, const float* dy, Shape s, UpSample2DParams p, float* dx) {
  const int oh = s.h * p.sh, ow = s.w * p.sw, C = s.c;
  const long long rows = (long long)s.n * s.h;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const long long n = r / s.h;
    const int i = int(r % s.h);
    int i0, i1;
    bilinear_outputs(i, p.sh, oh, i0, i1);
    for (int x = 0; x < s.w; ++x) {
      int j0, j1;
      bilinear_outputs(x, p.sw, ow, j0, j1);
      float* acc = dx + (size_t(r) * s.w + x) * C;
      std::fill(acc, acc + C, 0.f);
      for (int a = i0; a < i1; ++a) {
        const float wy = bilinear_weight(bilinear_tap(a, s.h, oh), i);
        if (wy == 0.f) continue;
        for (int b = j0; b < j1; ++b) {
          const float wx = bilinear_weight(bilinear_tap(b, s.w, ow), x);
          if (wx == 0.f) continue;
          const float* g = dy + ((size_t(n) * oh + a) * ow + b) * C;
          for (int c = 0; c < C; ++c) acc[c] = add_rn(acc[c], mul_rn(mul_rn(g[c], wy), wx));
        }
      }
    }
  }
}

}  // namespace trainer::cpu
