// PReLU forward / backward on the CPU (OpenMP over elements, and over slopes
// for the slope gradient, each summed over its uses in the order the CUDA
// kernels take), through backend/elementwise_math.h.
#include "backend/device_ops.h"

namespace trainer::cpu {

namespace {

/// f(e, s) for every element e of an input [N, H, W, C] (xs) and the index s
/// of its slope, in parallel over samples and rows.
template <class F>
void each_element(Shape xs, PReLUShape a, F f) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < xs.n; ++n)
    for (int h = 0; h < xs.h; ++h)
      for (int w = 0; w < xs.w; ++w)
        for (int c = 0; c < xs.c; ++c)
          f(((size_t(n) * xs.h + h) * xs.w + w) * xs.c + c, prelu_alpha_index(h, w, c, a));
}

}  // namespace

void prelu_forward(const Device&, const float* x, Shape xs, const float* alpha, PReLUShape a, float* y) {
  each_element(xs, a, [&](size_t e, size_t s) { y[e] = prelu_value(x[e], alpha[s]); });
}

void prelu_backward(const Device&, const float* x, Shape xs, const float* alpha, PReLUShape a, const float* dy,
                    float* dx, float* dalpha) {
  if (dx) each_element(xs, a, [&](size_t e, size_t s) { dx[e] = prelu_dx(x[e], alpha[s], dy[e]); });
  if (!dalpha) return;  // a frozen layer
  const long long slopes = (long long)a.ah * a.aw * a.ac;
  const size_t uses = xs.numel() / size_t(slopes);
#pragma omp parallel for schedule(static)
  for (long long s = 0; s < slopes; ++s) {
    const int k = int(s % a.ac), j = int(s / a.ac % a.aw), i = int(s / a.ac / a.aw);
    double sum = 0;
    for (size_t m = 0; m < uses; ++m) {
      const size_t e = prelu_use_offset(m, i, j, k, a, xs);
      sum += prelu_dalpha_term(x[e], dy[e]);
    }
    dalpha[s] = float(sum);
  }
}

}  // namespace trainer::cpu
