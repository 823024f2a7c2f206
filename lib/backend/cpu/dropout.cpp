// Dropout forward / backward on the CPU (OpenMP over (sample, 4096-element
// block) pairs), the mask drawn per element (per channel for SpatialDropout2D)
// through backend/elementwise_math.h.
#include <algorithm>

#include "backend/device_ops.h"

namespace trainer::cpu {

void dropout_forward(const Device&, const float* x, Shape s, uint64_t step_key, long long sample_offset,
                     DropoutParams p, float* y, uint8_t* mask) {
  const size_t per = s.sample_numel();
  constexpr size_t kBlock = 4096;
  const long long blocks = (long long)((per + kBlock - 1) / kBlock);
  const uint32_t thr = p.threshold;
  const float scale = p.scale;
  const size_t channels = p.per_channel ? size_t(s.c) : 0;  // the draw index: e % channels, or e
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (long long b = 0; b < blocks; ++b) {
      const uint64_t key = dropout_sample_key(step_key, uint64_t(sample_offset + n));
      const size_t off = size_t(n) * per;
      const size_t end = std::min(per, size_t(b + 1) * kBlock);
      for (size_t e = size_t(b) * kBlock; e < end; ++e) {
        const bool keep = dropout_keep(dropout_draw(key, channels ? e % channels : e), thr);
        mask[off + e] = uint8_t(keep);
        y[off + e] = dropout_apply(keep, x[off + e], scale);
      }
    }
}

void dropout_backward(const Device&, const float* dy, const uint8_t* mask, float scale, float* dx, size_t n) {
  const long long m = (long long)n;
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) dx[i] = dropout_apply(mask[i] != 0, dy[i], scale);
}

}  // namespace trainer::cpu
