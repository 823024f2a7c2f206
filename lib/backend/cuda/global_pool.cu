// GlobalAveragePooling2D and GlobalMaxPooling2D forward / backward on a GPU,
// on the tower's compute stream: the per (sample, channel) sums, maxima and
// tie counts are the deterministic reductions of sample_channel_reduce.cuh;
// the gradients are grid-stride kernels over the input's elements. fp32
// tensors only (the layers keep fp32 activations).
#include <limits>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/sample_channel_reduce.cuh"
#include "backend/device_ops.h"
#include "core/buffer.h"

namespace trainer::cuda {

namespace {

/// 1 where x[e] equals its (sample, channel)'s maximum y[row].
struct Tie {
  const float* x;
  const float* y;
  __device__ double operator()(size_t e, size_t row) const { return x[e] == y[row] ? 1.0 : 0.0; }
};

/// The largest value, NaN when one is NaN.
struct MaxOp {
  using Value = float;
  const float* x;
  __device__ float identity() const { return -std::numeric_limits<float>::infinity(); }
  __device__ float combine(float a, float b) const { return max_keeping_nan(a, b); }
  __device__ float term(size_t e, size_t) const { return x[e]; }
  __device__ float finish(float v) const { return v; }
};

/// dx[e] <- dy[row] / pixels.
struct MeanGrad {
  const float* dy;
  float* dx;
  unsigned long long HWC, C;
  float pixels;
  template <class I>
  __device__ void one(I e) const {
    dx[e] = dy[sample_channel_row(size_t(e), size_t(HWC), size_t(C))] / pixels;
  }
  template <class I>
  __device__ void quad(I) const {}
};

/// dx[e] <- x[e] == y[row] ? dy[row] / ties[row] : 0.
struct MaxGrad {
  const float* x;
  const float* y;
  const float* dy;
  const float* ties;
  float* dx;
  unsigned long long HWC, C;
  template <class I>
  __device__ void one(I e) const {
    const size_t row = sample_channel_row(size_t(e), size_t(HWC), size_t(C));
    dx[e] = x[e] == y[row] ? dy[row] / ties[row] : 0.f;
  }
  template <class I>
  __device__ void quad(I) const {}
};

}  // namespace

void global_avg_pool_forward(const Device& d, const float* x, Shape xs, float* y) {
  reduce_sample_channels(context(d), SumOp<Element>{Element{x}, double(xs.h) * xs.w}, xs, y);
}

void global_avg_pool_backward(const Device& d, const float* dy, Shape xs, float* dx) {
  const size_t n = xs.numel();
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), MeanGrad{dy, dx, xs.sample_numel(), (unsigned long long)xs.c, float(xs.h) * float(xs.w)},
                     n, false);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "global_avg_pool_backward");
}

void global_max_pool_forward(const Device& d, const float* x, Shape xs, float* y) {
  reduce_sample_channels(context(d), MaxOp{x}, xs, y);
}

void global_max_pool_backward(const Device& d, const float* x, Shape xs, const float* y, const float* dy, float* dx) {
  const size_t n = xs.numel();
  if (n == 0) return;
  CudaContext& ctx = context(d);
  Buffer<float> ties(d, size_t(xs.n) * size_t(xs.c));  // from the tower's caching allocator
  reduce_sample_channels(ctx, SumOp<Tie>{Tie{x, y}, 1.0}, xs, ties.data());
  launch_elementwise(ctx.stream(), MaxGrad{x, y, dy, ties.data(), dx, xs.sample_numel(), (unsigned long long)xs.c}, n,
                     false);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "global_max_pool_backward");
}

}  // namespace trainer::cuda
