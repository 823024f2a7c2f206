// GroupNormalization on a GPU (backend/elementwise_ops.h), on the tower's
// compute stream: the per (sample, channel) double sums are the deterministic
// reduction of sample_channel_reduce.cuh; one thread per (sample, group)
// folds them over the group's channels in channel order, one thread per
// channel folds the weight gradients over the samples in order, and
// grid-stride kernels apply gn_apply / gn_backward per element (the CPU's
// formulas, backend/elementwise_math.h). fp32 tensors (the layer keeps fp32
// activations).
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/sample_channel_reduce.cuh"
#include "backend/device_ops.h"
#include "core/error.h"

namespace trainer::cuda {

namespace {

/// The index of the (sample, group) of row n * C + c, in an [N, groups] array.
__device__ inline size_t group_of(size_t row, size_t C, size_t per, size_t groups) {
  return row / C * groups + row % C / per;
}

/// Sums of (x, x^2), or of (dy, dy * xhat) when dy is given, per (sample, channel).
struct PairSumOp {
  using Value = double2;
  const float* x;
  const float* dy;  ///< nullptr: the forward's sums.
  const float* mean;
  const float* istd;
  unsigned long long C, per, groups;
  __device__ double2 identity() const { return make_double2(0.0, 0.0); }
  __device__ double2 combine(double2 a, double2 b) const { return make_double2(a.x + b.x, a.y + b.y); }
  __device__ double2 term(size_t e, size_t row) const {
    if (!dy) {
      const double v = x[e];
      return make_double2(v, v * v);
    }
    const size_t ng = group_of(row, C, per, groups);
    const double g = dy[e];
    return make_double2(g, g * double(bn_xhat(x[e], mean[ng], istd[ng])));
  }
  __device__ double2 finish(double2 v) const { return v; }
};

/// mean, istd of each (sample, group) from the forward's sums.
__global__ void group_stats_kernel(const double2* sums, int N, int C, int groups, double m, double epsilon,
                                   float* mean, float* istd) {
  const int per = C / groups;
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < N * groups; i += int(gridDim.x * blockDim.x)) {
    const int n = i / groups, g = i % groups;
    double s1 = 0, s2 = 0;
    for (int c = g * per; c < (g + 1) * per; ++c) {
      const double2 p = sums[size_t(n) * size_t(C) + size_t(c)];
      s1 += p.x, s2 += p.y;
    }
    const double mu = s1 / m, var = fmax(s2 / m - mu * mu, 0.0);
    mean[i] = float(mu);
    istd[i] = float(1.0 / sqrt(var + epsilon));
  }
}

/// dbeta[c], dgamma[c] <- the backward sums of channel c over the samples, in order.
__global__ void group_param_grads_kernel(const double2* sums, int N, int C, float* dgamma, float* dbeta) {
  for (int c = int(blockIdx.x * blockDim.x + threadIdx.x); c < C; c += int(gridDim.x * blockDim.x)) {
    double db = 0, dg = 0;
    for (int n = 0; n < N; ++n) {
      const double2 p = sums[size_t(n) * size_t(C) + size_t(c)];
      db += p.x, dg += p.y;
    }
    if (dbeta) dbeta[c] = float(db);
    if (dgamma) dgamma[c] = float(dg);
  }
}

/// coef[2 i], coef[2 i + 1] <- mean(gamma dy), mean(gamma dy xhat) over (sample, group) i.
__global__ void group_coef_kernel(const double2* sums, const float* gamma, int N, int C, int groups, double m,
                                  float* coef) {
  const int per = C / groups;
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < N * groups; i += int(gridDim.x * blockDim.x)) {
    const int n = i / groups, g = i % groups;
    double k2 = 0, k3 = 0;
    for (int c = g * per; c < (g + 1) * per; ++c) {
      const double2 p = sums[size_t(n) * size_t(C) + size_t(c)];
      const double w = gamma ? gamma[c] : 1.0;
      k2 += w * p.x, k3 += w * p.y;
    }
    coef[2 * i] = float(k2 / m);
    coef[2 * i + 1] = float(k3 / m);
  }
}

/// y[e] <- gn_apply of element e.
struct GroupApply {
  const float* x;
  const float* mean;
  const float* istd;
  const float* gamma;
  const float* beta;
  float* y;
  unsigned long long HWC, C, per, groups;
  template <class I>
  __device__ void one(I e) const {
    const size_t row = sample_channel_row(size_t(e), size_t(HWC), size_t(C)), c = row % C;
    const size_t ng = group_of(row, C, per, groups);
    y[e] = gn_apply(x[e], mean[ng], istd[ng], gamma ? gamma[c] : 1.f, beta ? beta[c] : 0.f);
  }
  template <class I>
  __device__ void quad(I) const {}
};

/// dx[e] <- gn_backward of element e.
struct GroupBackward {
  const float* x;
  const float* dy;
  const float* mean;
  const float* istd;
  const float* gamma;
  const float* coef;
  float* dx;
  unsigned long long HWC, C, per, groups;
  template <class I>
  __device__ void one(I e) const {
    const size_t row = sample_channel_row(size_t(e), size_t(HWC), size_t(C)), c = row % C;
    const size_t ng = group_of(row, C, per, groups);
    dx[e] = gn_backward(dy[e], x[e], mean[ng], istd[ng], gamma ? gamma[c] : 1.f, coef[2 * ng], coef[2 * ng + 1]);
  }
  template <class I>
  __device__ void quad(I) const {}
};

/// Elements per (sample, group).
double group_size(Shape s, int groups) { return double(s.h) * s.w * (s.c / groups); }

/// sums as the double2 pairs the kernels read. InternalError naming op when
/// it is not 16-byte aligned (Buffer's allocations are).
double2* sum_pairs(double* sums, const char* op) {
  if (reinterpret_cast<std::uintptr_t>(sums) % alignof(double2) != 0)
    throw InternalError(std::string(op) + ": the sums scratch is not 16-byte aligned");
  return reinterpret_cast<double2*>(sums);
}

}  // namespace

void group_norm_stats(const Device& d, const float* x, Shape s, double epsilon, const NormArgs& a) {
  if (s.numel() == 0) return;
  const int groups = a.groups;
  float *mean = a.mean, *istd = a.istd;
  CudaContext& ctx = context(d);
  const unsigned long long C = (unsigned long long)s.c, per = C / (unsigned long long)groups;
  double2* pairs = sum_pairs(a.sums, "group_norm_stats");
  reduce_sample_channels(ctx, PairSumOp{x, nullptr, nullptr, nullptr, C, per, (unsigned long long)groups}, s, pairs);
  const int items = s.n * groups;
  group_stats_kernel<<<grid_blocks(size_t(items)), kThreads, 0, ctx.stream()>>>(pairs, s.n, s.c, groups,
                                                                                 group_size(s, groups), epsilon,
                                                                                 mean, istd);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "group_norm_stats");
}

void group_norm_apply(const Device& d, const float* x, Shape s, const NormArgs& a, float* y) {
  const size_t n = s.numel();
  if (n == 0) return;
  CudaContext& ctx = context(d);
  const unsigned long long C = (unsigned long long)s.c, G = (unsigned long long)a.groups;
  launch_elementwise(ctx.stream(), GroupApply{x, a.mean, a.istd, a.gamma, a.beta, y, s.sample_numel(), C, C / G, G},
                     n, false);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "group_norm_apply");
}

void group_norm_backward(const Device& d, const float* x, const float* dy, Shape s, const NormArgs& a, float* dx) {
  CudaContext& ctx = context(d);
  const int groups = a.groups;
  const float *mean = a.mean, *istd = a.istd, *gamma = a.gamma;
  float *dgamma = a.dgamma, *dbeta = a.dbeta, *coef = a.coef;
  const unsigned long long C = (unsigned long long)s.c, per = C / (unsigned long long)groups,
                           G = (unsigned long long)groups;
  double2* pairs = sum_pairs(a.sums, "group_norm_backward");
  if (s.numel() == 0) {  // no samples: the weight gradients are 0
    if (dgamma) TRAINER_CUDA_CHECK(ctx, cudaMemsetAsync(dgamma, 0, size_t(s.c) * sizeof(float), ctx.stream()));
    if (dbeta) TRAINER_CUDA_CHECK(ctx, cudaMemsetAsync(dbeta, 0, size_t(s.c) * sizeof(float), ctx.stream()));
    return;
  }
  reduce_sample_channels(ctx, PairSumOp{x, dy, mean, istd, C, per, G}, s, pairs);
  group_param_grads_kernel<<<grid_blocks(size_t(s.c)), kThreads, 0, ctx.stream()>>>(pairs, s.n, s.c, dgamma, dbeta);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "group_norm_param_grads");
  if (!dx) return;
  const int items = s.n * groups;
  group_coef_kernel<<<grid_blocks(size_t(items)), kThreads, 0, ctx.stream()>>>(pairs, gamma, s.n, s.c, groups,
                                                                                group_size(s, groups), coef);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "group_norm_coefficients");
  launch_elementwise(ctx.stream(), GroupBackward{x, dy, mean, istd, gamma, coef, dx, s.sample_numel(), C, per, G},
                     s.numel(), false);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "group_norm_backward");
}

}  // namespace trainer::cuda
