// GroupNormalization on the CPU (backend/elementwise_ops.h): per (sample,
// channel) double sums over the pixels (sample_channel_fold.h, each sum in
// row-major pixel order), folded over each group's channels in channel order;
// the element loops through backend/elementwise_math.h's gn_apply and
// gn_backward.
#include <cmath>

#include "backend/cpu/sample_channel_fold.h"
#include "backend/device_ops.h"

namespace trainer::cpu {

namespace {

/// Two sums folded together.
struct SumPair {
  double a = 0, b = 0;
};

}  // namespace

void group_norm_stats(const Device&, const float* x, Shape s, double epsilon, const NormArgs& a) {
  const int groups = a.groups;
  double* sums = a.sums;
  fold_sample_channels(
      s, SumPair{},
      [x](SumPair acc, size_t e) {
        const double v = x[e];
        return SumPair{acc.a + v, acc.b + v * v};
      },
      [sums](size_t row, SumPair p) { sums[2 * row] = p.a, sums[2 * row + 1] = p.b; });
  const int per = s.c / groups;
  const double m = double(s.h) * s.w * per;
  for (int n = 0; n < s.n; ++n)
    for (int g = 0; g < groups; ++g) {
      double s1 = 0, s2 = 0;
      for (int c = g * per; c < (g + 1) * per; ++c) {
        const size_t row = size_t(n) * size_t(s.c) + size_t(c);
        s1 += sums[2 * row], s2 += sums[2 * row + 1];
      }
      const double mu = s1 / m, var = std::max(s2 / m - mu * mu, 0.0);
      a.mean[n * groups + g] = float(mu);
      a.istd[n * groups + g] = float(1.0 / std::sqrt(var + epsilon));
    }
}

void group_norm_apply(const Device&, const float* x, Shape s, const NormArgs& a, float* y) {
  const int groups = a.groups;
  const float *mean = a.mean, *istd = a.istd, *gamma = a.gamma, *beta = a.beta;
  const size_t C = size_t(s.c), per = C / size_t(groups);
  for_sample_channel_elements(s, [=](size_t e, size_t row) {
    const size_t c = row % C, ng = row / C * size_t(groups) + c / per;
    y[e] = gn_apply(x[e], mean[ng], istd[ng], gamma ? gamma[c] : 1.f, beta ? beta[c] : 0.f);
  });
}

void group_norm_backward(const Device&, const float* x, const float* dy, Shape s, const NormArgs& a, float* dx) {
  const int groups = a.groups;
  const float *mean = a.mean, *istd = a.istd, *gamma = a.gamma;
  double* sums = a.sums;
  float* coef = a.coef;
  const size_t C = size_t(s.c), per = C / size_t(groups);
  // Per (sample, channel): sum dy and sum dy * xhat.
  fold_sample_channels(
      s, SumPair{},
      [=](SumPair acc, size_t e) {
        const size_t row = sample_channel_row(e, s.sample_numel(), C);
        const size_t ng = row / C * size_t(groups) + row % C / per;
        const double g = dy[e];
        return SumPair{acc.a + g, acc.b + g * double(bn_xhat(x[e], mean[ng], istd[ng]))};
      },
      [sums](size_t row, SumPair p) { sums[2 * row] = p.a, sums[2 * row + 1] = p.b; });
  for (size_t c = 0; c < C; ++c) {  // over the samples in order
    double db = 0, dg = 0;
    for (int n = 0; n < s.n; ++n) db += sums[2 * (size_t(n) * C + c)], dg += sums[2 * (size_t(n) * C + c) + 1];
    if (a.dbeta) a.dbeta[c] = float(db);
    if (a.dgamma) a.dgamma[c] = float(dg);
  }
  if (!dx) return;
  const double m = double(s.h) * s.w * double(per);
  for (int n = 0; n < s.n; ++n)
    for (int g = 0; g < groups; ++g) {  // k2 = mean(gamma dy), k3 = mean(gamma dy xhat) over the group
      double k2 = 0, k3 = 0;
      for (size_t c = size_t(g) * per; c < size_t(g + 1) * per; ++c) {
        const size_t row = size_t(n) * C + c;
        const double w = gamma ? gamma[c] : 1.0;
        k2 += w * sums[2 * row], k3 += w * sums[2 * row + 1];
      }
      coef[2 * (n * groups + g)] = float(k2 / m);
      coef[2 * (n * groups + g) + 1] = float(k3 / m);
    }
  for_sample_channel_elements(s, [=](size_t e, size_t row) {
    const size_t c = row % C, ng = row / C * size_t(groups) + c / per;
    dx[e] = gn_backward(dy[e], x[e], mean[ng], istd[ng], gamma ? gamma[c] : 1.f, coef[2 * ng], coef[2 * ng + 1]);
  });
}

}  // namespace trainer::cpu
