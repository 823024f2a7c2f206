// LayerNormalization on a GPU (backend/elementwise_ops.h), on the tower's
// compute stream: one warp per row (pixel) of x [rows, C], lane l folding
// channels l, l + 32, ... in double, then a butterfly of shuffles (a fixed
// order, so every run gives the same bits) for the statistics and for dx's
// two means; the weight gradients are the deterministic reduction of
// sample_channel_reduce.cuh over x seen as [1, rows, 1, C]. The element math
// is the CPU's (backend/elementwise_math.h). fp32 tensors; no scratch beyond
// the reduction's workspace.
#include <climits>
#include <string>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/sample_channel_reduce.cuh"
#include "backend/device_ops.h"
#include "core/error.h"

namespace trainer::cuda {

namespace {

constexpr unsigned kWarp = 32;

/// v summed over the warp, every lane getting the result (a fixed butterfly).
__device__ inline double warp_sum(double v) {
  for (unsigned o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, int(o));
  return v;
}

/// A grid-stride loop of one warp per row: every lane of a warp sees the same rows.
__device__ inline size_t first_row() { return (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; }
__device__ inline size_t row_stride() { return size_t(gridDim.x) * blockDim.x / kWarp; }

__global__ void layer_stats_kernel(const float* x, size_t rows, int C, double epsilon, float* mean, float* istd) {
  const int lane = int(threadIdx.x % kWarp);
  for (size_t r = first_row(); r < rows; r += row_stride()) {
    const float* v = x + r * size_t(C);
    double s1 = 0, s2 = 0;
    for (int c = lane; c < C; c += int(kWarp)) {
      const double a = v[c];
      s1 += a, s2 += a * a;
    }
    s1 = warp_sum(s1), s2 = warp_sum(s2);
    if (lane == 0) {
      const double mu = s1 / double(C), var = fmax(s2 / double(C) - mu * mu, 0.0);
      mean[r] = float(mu);
      istd[r] = float(1.0 / sqrt(var + epsilon));
    }
  }
}

__global__ void layer_dx_kernel(const float* x, const float* dy, size_t rows, int C, const float* mean,
                                const float* istd, const float* gamma, float* dx) {
  const int lane = int(threadIdx.x % kWarp);
  for (size_t r = first_row(); r < rows; r += row_stride()) {
    const size_t base = r * size_t(C);
    double k2 = 0, k3 = 0;
    for (int c = lane; c < C; c += int(kWarp)) {
      const double g = (gamma ? gamma[c] : 1.0) * dy[base + size_t(c)];
      k2 += g, k3 += g * double(bn_xhat(x[base + size_t(c)], mean[r], istd[r]));
    }
    const float m2 = float(warp_sum(k2) / double(C)), m3 = float(warp_sum(k3) / double(C));
    for (int c = lane; c < C; c += int(kWarp))  // a lane writes only the channels it read: dx may be dy
      dx[base + size_t(c)] =
          gn_backward(dy[base + size_t(c)], x[base + size_t(c)], mean[r], istd[r], gamma ? gamma[c] : 1.f, m2, m3);
  }
}

/// dy[e] * xhat(e) in double, a term of dgamma's SumOp (element e of [1, rows, 1, C] is in row e / C).
struct DyXhat {
  const float* x;
  const float* dy;
  const float* mean;
  const float* istd;
  unsigned long long C;
  __device__ double operator()(size_t e, size_t) const {
    const size_t r = e / size_t(C);
    return double(dy[e]) * double(bn_xhat(x[e], mean[r], istd[r]));
  }
};

/// Blocks (of kThreads / 32 warps) for a grid-stride loop of one warp per row.
unsigned row_blocks(size_t rows) { return grid_blocks(rows * kWarp); }

}  // namespace

void layer_norm_stats(const Device& d, const float* x, Shape s, double epsilon, const NormArgs& a) {
  const size_t rows = size_t(s.n) * size_t(s.h) * size_t(s.w);
  if (rows == 0) return;
  CudaContext& ctx = context(d);
  layer_stats_kernel<<<row_blocks(rows), kThreads, 0, ctx.stream()>>>(x, rows, s.c, epsilon, a.mean, a.istd);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "layer_norm_stats");
}

void layer_norm_backward(const Device& d, const float* x, const float* dy, Shape s, const NormArgs& a, float* dx) {
  CudaContext& ctx = context(d);
  const size_t rows = size_t(s.n) * size_t(s.h) * size_t(s.w);
  const int C = s.c;
  const float *mean = a.mean, *istd = a.istd, *gamma = a.gamma;
  float *dgamma = a.dgamma, *dbeta = a.dbeta;
  if (rows == 0) {  // no samples: the weight gradients are 0
    if (dgamma) TRAINER_CUDA_CHECK(ctx, cudaMemsetAsync(dgamma, 0, size_t(C) * sizeof(float), ctx.stream()));
    if (dbeta) TRAINER_CUDA_CHECK(ctx, cudaMemsetAsync(dbeta, 0, size_t(C) * sizeof(float), ctx.stream()));
    return;
  }
  if (rows > size_t(INT_MAX))
    throw InternalError("layer_norm_backward: " + std::to_string(rows) + " rows exceed the reduction's int shape");
  const Shape all_rows{1, int(rows), 1, C};  // before dx, which may overwrite dy
  if (dbeta) reduce_sample_channels(ctx, SumOp<Element>{Element{dy}, 1.0}, all_rows, dbeta);
  if (dgamma)
    reduce_sample_channels(ctx, SumOp<DyXhat>{DyXhat{x, dy, mean, istd, (unsigned long long)C}, 1.0}, all_rows,
                           dgamma);
  if (!dx) return;
  layer_dx_kernel<<<row_blocks(rows), kThreads, 0, ctx.stream()>>>(x, dy, rows, C, mean, istd, gamma, dx);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "layer_norm_backward");
}

}  // namespace trainer::cuda
