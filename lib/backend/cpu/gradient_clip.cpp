// Keras's clipvalue on the CPU (OpenMP over the elements), per element
// through backend/train_math.h.
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cpu {

void clip_by_value(const Device&, float* g, size_t n, float limit) {
  const long long m = (long long)n;
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < m; ++i) g[i] = clipped_value(g[i], limit);
}

}  // namespace trainer::cpu
