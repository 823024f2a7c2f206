// Weight regularizers on the CPU (OpenMP over the weights): the penalty sums
// (also gradient clipping's norms; deterministic) and the gradient term, per
// element through backend/train_math.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cpu {

void abs_and_square_sums(const Device&, const float* const* ws, const size_t* ns, size_t k, double* sums_host) {
  // Fixed chunks, each summed by one thread, then added in chunk order: the
  // same bits whatever the thread count or timing (an OpenMP reduction adds
  // the threads' partials in the order they finish). Gradient clipping scales
  // every tower's gradients by a factor from these sums, so towers must agree.
  constexpr size_t kChunk = 4096;
  thread_local std::vector<double> partials;  // per tower thread: no allocation once sized
  for (size_t j = 0; j < k; ++j) {
    const float* w = ws[j];
    const size_t n = ns[j], chunks = (n + kChunk - 1) / kChunk;
    partials.assign(2 * chunks, 0.0);
    double* part = partials.data();
#pragma omp parallel for schedule(static)
    for (long long c = 0; c < (long long)chunks; ++c) {
      double abs_sum = 0, square_sum = 0;
      const size_t end = std::min(n, size_t(c + 1) * kChunk);
      for (size_t i = size_t(c) * kChunk; i < end; ++i) {
        const double x = w[i];
        abs_sum += std::abs(x);
        square_sum += x * x;
      }
      part[2 * c] = abs_sum, part[2 * c + 1] = square_sum;
    }
    double abs_sum = 0, square_sum = 0;
    for (size_t c = 0; c < chunks; ++c) abs_sum += part[2 * c], square_sum += part[2 * c + 1];
    sums_host[2 * j] = abs_sum, sums_host[2 * j + 1] = square_sum;
  }
}

void regularizer_grad(const Device&, const float* w, float* g, size_t n, float l1, float l2) {
  const long long m = (long long)n;
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < m; ++i) g[i] = regularized_grad(g[i], w[i], l1, l2);
}

}  // namespace trainer::cpu
