// Keras's clipvalue and clipnorm / global_clipnorm on the CPU (OpenMP over
// the elements), per element through backend/train_math.h.
#include <vector>

#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cpu {

void clip_by_value(const Device&, float* g, size_t n, float limit) {
  const long long m = (long long)n;
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < m; ++i) g[i] = clipped_value(g[i], limit);
}

void clip_by_norm(const Device& d, float* const* gs, const size_t* ns, size_t k, double limit, bool global) {
  thread_local std::vector<double> sums;  // per tower thread: no allocation once sized
  sums.resize(2 * k);
  cpu::abs_and_square_sums(d, gs, ns, k, sums.data());
  for (size_t j = 0; j < k; ++j) {
    const float f = clip_norm_factor(sums[2 * j + 1], limit, global);
    if (f == 1.f) continue;  // g * 1 is g
    float* g = gs[j];
    const long long m = (long long)ns[j];
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < m; ++i) g[i] *= f;
  }
}

}  // namespace trainer::cpu
