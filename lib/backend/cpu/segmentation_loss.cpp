// Segmentation loss sums and gradient on the CPU (OpenMP over each sample's
// values), per element through backend/train_math.h.
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cpu {

void segmentation_sums(const Device&, const float* z, const float* y, int n, size_t m, bool need_bce,
                       bool need_dice, double* sums_host) {
  for (int s = 0; s < n; ++s) {
    const float* zs = z + size_t(s) * m;
    const float* ys = y + size_t(s) * m;
    double bce = 0, spy = 0, sp = 0, sy = 0;
#pragma omp parallel for reduction(+ : bce, spy, sp, sy) schedule(static)
    for (size_t i = 0; i < m; ++i) {
      add_loss_terms(zs[i], ys[i], need_bce, need_dice, bce, spy, sp, sy);
    }
    double* out = sums_host + size_t(s) * 4;
    out[0] = bce, out[1] = spy, out[2] = sp, out[3] = sy;
  }
}

void segmentation_loss_grad(const Device&, const float* z, const float* y, int n, size_t m,
                            const float* coef_host, float* g) {
  for (int s = 0; s < n; ++s) {
    const size_t off = size_t(s) * m;
    const float c0 = coef_host[3 * s], c1 = coef_host[3 * s + 1], c2 = coef_host[3 * s + 2];
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < m; ++i) g[off + i] = segmentation_grad(z[off + i], y[off + i], c0, c1, c2);
  }
}

void dice_loss_grad(const Device& d, const float* z, const float* y, int n, size_t m, bool with_bce,
                    double* sums_host, float* g) {
  cpu::segmentation_sums(d, z, y, n, m, with_bce, true, sums_host);
  for (int s = 0; s < n; ++s) {
    float c[3];
    dice_coefficients(sums_host + size_t(s) * 4, m, with_bce, c);
    cpu::segmentation_loss_grad(d, z + size_t(s) * m, y + size_t(s) * m, 1, m, c, g + size_t(s) * m);
  }
}

}  // namespace trainer::cpu
