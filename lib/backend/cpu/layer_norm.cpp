// LayerNormalization on the CPU (backend/elementwise_ops.h): OpenMP over the
// rows (pixels) of x [rows, C] for the statistics and dx, each row's double
// sums over its channels in order; the weight gradients per block of
// kRowsPerBlock rows (blocks fixed by rows, not by the thread count), the
// blocks' per-channel partials then added in block order. The element math is
// backend/elementwise_math.h's bn_xhat and gn_backward.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/device_ops.h"

namespace trainer::cpu {

namespace {

constexpr size_t kRowsPerBlock = 256;

}  // namespace

void layer_norm_stats(const Device&, const float* x, Shape s, double epsilon, const NormArgs& a) {
  const size_t rows = size_t(s.n) * size_t(s.h) * size_t(s.w), Cs = size_t(s.c);
  const int C = s.c;
  float *mean = a.mean, *istd = a.istd;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < (long long)rows; ++r) {
    const float* v = x + size_t(r) * Cs;
    double s1 = 0, s2 = 0;
    for (size_t c = 0; c < Cs; ++c) {
      const double e = v[c];
      s1 += e, s2 += e * e;
    }
    const double mu = s1 / double(C), var = std::max(s2 / double(C) - mu * mu, 0.0);
    mean[r] = float(mu);
    istd[r] = float(1.0 / std::sqrt(var + epsilon));
  }
}

void layer_norm_backward(const Device&, const float* x, const float* dy, Shape s, const NormArgs& a, float* dx) {
  const size_t rows = size_t(s.n) * size_t(s.h) * size_t(s.w), Cs = size_t(s.c);
  const int C = s.c;
  const float *mean = a.mean, *istd = a.istd, *gamma = a.gamma;
  float *dgamma = a.dgamma, *dbeta = a.dbeta;
  if (dgamma || dbeta) {  // before dx, which may overwrite dy
    const size_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    std::vector<double> partial(blocks * 2 * Cs, 0.0);  // [blocks, C, 2]: sum dy, sum dy * xhat
#pragma omp parallel for schedule(static)
    for (long long b = 0; b < (long long)blocks; ++b) {
      double* acc = partial.data() + size_t(b) * 2 * Cs;
      const size_t end = std::min(rows, (size_t(b) + 1) * kRowsPerBlock);
      for (size_t r = size_t(b) * kRowsPerBlock; r < end; ++r)
        for (size_t c = 0; c < Cs; ++c) {
          const size_t e = r * Cs + c;
          const double g = dy[e];
          acc[2 * c] += g;
          acc[2 * c + 1] += g * double(bn_xhat(x[e], mean[r], istd[r]));
        }
    }
    for (size_t c = 0; c < Cs; ++c) {
      double db = 0, dg = 0;
      for (size_t b = 0; b < blocks; ++b) db += partial[(b * Cs + c) * 2], dg += partial[(b * Cs + c) * 2 + 1];
      if (dbeta) dbeta[c] = float(db);
      if (dgamma) dgamma[c] = float(dg);
    }
  }
  if (!dx) return;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < (long long)rows; ++r) {
    const size_t base = size_t(r) * Cs;
    double k2 = 0, k3 = 0;  // sums of gamma dy and gamma dy xhat over the row
    for (size_t c = 0; c < Cs; ++c) {
      const double w = gamma ? gamma[c] : 1.0, g = w * dy[base + c];
      k2 += g, k3 += g * double(bn_xhat(x[base + c], mean[r], istd[r]));
    }
    const float m2 = float(k2 / double(C)), m3 = float(k3 / double(C));
    for (size_t c = 0; c < Cs; ++c)
      dx[base + c] = gn_backward(dy[base + c], x[base + c], mean[r], istd[r], gamma ? gamma[c] : 1.f, m2, m3);
  }
}

}  // namespace trainer::cpu
