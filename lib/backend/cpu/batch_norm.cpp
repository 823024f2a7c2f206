// BatchNormOp's CPU backend: per-channel reductions in double over static
// pixel ranges per OpenMP thread (partial sums added in thread order), and
// OpenMP loops over pixels for the element-wise steps, per element through
// backend/elementwise_math.h. Every array is host memory.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/device_ops.h"

namespace trainer::cpu {

namespace {

class BatchNormCpu final : public BatchNormBackend {
 public:
  void stat_sums(const float* x, Shape s, double* sums) override {
    const int C = s.c;
    channel_sums((long long)s.n * s.h * s.w, C, sums, [x, C](long long p, double* s1, double* s2) {
      const float* row = x + p * C;
      for (int c = 0; c < C; ++c) {
        const double v = row[c];
        s1[c] += v;
        s2[c] += v * v;
      }
    });
  }

  void train_coefficients(const double* sums, double count, BatchNormSettings o,
                          const BatchNormChannels& v) override {
    const int C = v.C;
    const double unbias = count / std::max(count - 1.0, 1.0), mom = o.momentum;
    for (int c = 0; c < C; ++c) {
      const double m = sums[c] / count;
      const double var = std::max(sums[C + c] / count - m * m, 0.0);
      v.mean[c] = float(m);
      v.istd[c] = float(1.0 / std::sqrt(var + o.epsilon));
      v.moving_mean[c] = float(v.moving_mean[c] * mom + m * (1.0 - mom));
      v.moving_var[c] = float(v.moving_var[c] * mom + var * unbias * (1.0 - mom));
    }
    scale_and_offset(v);
  }

  void inference_coefficients(double epsilon, const BatchNormChannels& v) override {
    for (int c = 0; c < v.C; ++c) {
      v.mean[c] = v.moving_mean[c];
      v.istd[c] = float(1.0 / std::sqrt(double(v.moving_var[c]) + epsilon));
    }
    scale_and_offset(v);
  }

  void apply(const float* x, Shape s, const float* a, const float* b, float* y) override {
    const int C = s.c;
    const long long P = (long long)s.n * s.h * s.w;
#pragma omp parallel for schedule(static)
    for (long long p = 0; p < P; ++p) {
      const float* src = x + p * C;
      float* dst = y + p * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) dst[c] = bn_apply(src[c], a[c], b[c]);
    }
  }

  void grad_sums(const float* x, const float* dy, Shape s, const BatchNormChannels& v, double* sums) override {
    const int C = s.c;
    const float *mean = v.mean, *istd = v.istd;
    channel_sums((long long)s.n * s.h * s.w, C, sums, [=](long long p, double* s1, double* s2) {
      const float* xr = x + p * C;
      const float* gr = dy + p * C;
      for (int c = 0; c < C; ++c) {
        s1[c] += gr[c];
        s2[c] += double(gr[c]) * bn_xhat(xr[c], mean[c], istd[c]);
      }
    });
  }

  void param_grads(const double* sums, int C, float* dgamma, float* dbeta) override {
    for (int c = 0; c < C; ++c) {
      if (dbeta) dbeta[c] = float(sums[c]);
      if (dgamma) dgamma[c] = float(sums[C + c]);
    }
  }

  void backward_coefficients(const double* sums, double count, bool batch_stats,
                             const BatchNormChannels& v) override {
    const int C = v.C;
    for (int c = 0; c < C; ++c) {
      v.k1[c] = (v.gamma ? v.gamma[c] : 1.f) * v.istd[c];
      v.k2[c] = batch_stats ? float(sums[c] / count) : 0.f;
      v.k3[c] = batch_stats ? float(sums[C + c] / count) : 0.f;
    }
  }

  void backward_data(const float* x, const float* dy, Shape s, const BatchNormChannels& v, float* dx) override {
    const int C = s.c;
    const float *mean = v.mean, *istd = v.istd, *k1 = v.k1, *k2 = v.k2, *k3 = v.k3;
    const long long P = (long long)s.n * s.h * s.w;
#pragma omp parallel for schedule(static)
    for (long long p = 0; p < P; ++p) {
      const float* xr = x + p * C;
      const float* gr = dy + p * C;
      float* dr = dx + p * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) dr[c] = bn_backward(gr[c], xr[c], mean[c], istd[c], k1[c], k2[c], k3[c]);
    }
  }

 private:
  /// v.a = gamma * istd, v.b = beta - mean * a, per channel.
  static void scale_and_offset(const BatchNormChannels& v) {
    for (int c = 0; c < v.C; ++c) {
      v.a[c] = (v.gamma ? v.gamma[c] : 1.f) * v.istd[c];
      v.b[c] = (v.beta ? v.beta[c] : 0.f) - v.mean[c] * v.a[c];
    }
  }
  /// out[c] = sum_p f, out[C + c] = sum_p g over P pixels, fg(p, s1, s2) adding
  /// pixel p's terms to s1[C] and s2[C].
  template <class F>
  void channel_sums(long long P, int C, double* out, F fg) {
    const int T = omp_get_max_threads();
    partial_.assign(size_t(T) * 2 * C, 0.0);
    std::fill(out, out + size_t(2) * C, 0.0);
#pragma omp parallel num_threads(T)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      double* s1 = partial_.data() + size_t(t) * 2 * C;
      double* s2 = s1 + C;
      const long long begin = P * t / nt, end = P * (t + 1) / nt;
      for (long long p = begin; p < end; ++p) fg(p, s1, s2);
    }
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < 2 * C; ++i) out[i] += partial_[size_t(t) * 2 * C + i];
  }

  std::vector<double> partial_;  ///< Per-thread partial sums [T, 2C], kept across calls.
};

}  // namespace

std::unique_ptr<BatchNormBackend> make_batch_norm(const Device&) { return std::make_unique<BatchNormCpu>(); }

}  // namespace trainer::cpu
