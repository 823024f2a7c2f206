// Weight regularizers on the CPU (OpenMP over the weights): the penalty sums
// and the gradient term, per element through backend/train_math.h.
#include <cmath>

#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cpu {

void abs_and_square_sums(const Device&, const float* const* ws, const size_t* ns, size_t k, double* sums_host) {
  for (size_t j = 0; j < k; ++j) {
    const float* w = ws[j];
    double abs_sum = 0, square_sum = 0;
    const long long m = (long long)ns[j];
#pragma omp parallel for reduction(+ : abs_sum, square_sum) schedule(static)
    for (long long i = 0; i < m; ++i) {
      const double x = w[i];
      abs_sum += std::abs(x);
      square_sum += x * x;
    }
    sums_host[2 * j] = abs_sum, sums_host[2 * j + 1] = square_sum;
  }
}

void regularizer_grad(const Device&, const float* w, float* g, size_t n, float l1, float l2) {
  const long long m = (long long)n;
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < m; ++i) g[i] = regularized_grad(g[i], w[i], l1, l2);
}

}  // namespace trainer::cpu
