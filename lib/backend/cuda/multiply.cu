// Multiply and its gradients on a GPU, on the tower's compute stream: the
// products are grid-stride kernels over the elements (float4 accesses when
// both tensors have every channel and every array is 16-byte aligned); the
// gradient of a broadcast one-channel input is one thread per pixel adding
// its C products in channel order, as the CPU does. A [1, 1, C] input's
// per (sample, channel) scales: a grid-stride product, and for their gradient
// the deterministic reduction of sample_channel_reduce.cuh.
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/sample_channel_reduce.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// y[i] <- a[i] * b[i / C] (broadcast) or a[i] * b[i]. quad() only without broadcast.
struct Product {
  const float* a;
  const float* b;
  float* y;
  unsigned long long C;
  bool broadcast;
  template <class I>
  __device__ void one(I i) const {
    y[i] = a[i] * b[broadcast ? I(i / C) : i];
  }
  template <class I>
  __device__ void quad(I j) const {
    const float4 u = load4(a, j), v = load4(b, j);
    store4(y, j, make_float4(u.x * v.x, u.y * v.y, u.z * v.z, u.w * v.w));
  }
};

/// db[p] <- sum over c of dy[p, c] * a[p, c], in channel order.
__global__ void channel_dot_kernel(const float* dy, const float* a, long long P, int C, float* db) {
  for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < P; p += (long long)gridDim.x * blockDim.x) {
    float sum = 0.f;
    for (int c = 0; c < C; ++c) sum += dy[p * C + c] * a[p * C + c];
    db[p] = sum;
  }
}

/// a * s, a per (sample, channel) scale.
struct Times {
  __device__ float operator()(float a, float s) const { return a * s; }
};

/// dy[e] * x[e] in double, a term of a scale's gradient.
struct ScaleGradTerm {
  const float* dy;
  const float* x;
  __device__ double operator()(size_t e, size_t) const { return double(dy[e]) * double(x[e]); }
};

void channel_scale(CudaContext& ctx, const float* a, const float* s, Shape xs, float* y) {
  launch_elementwise(ctx.stream(), RowBroadcast<Times>{a, s, y, xs.sample_numel(), (unsigned long long)xs.c, {}},
                     xs.numel(), false);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "scale_channels");
}

void product(CudaContext& ctx, const float* a, const float* b, bool broadcast, long long P, int C, float* y) {
  const size_t n = size_t(P) * size_t(C);
  launch_elementwise(ctx.stream(), Product{a, b, y, (unsigned long long)C, broadcast}, n,
                     !broadcast && aligned16(a, b, y));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "multiply");
}

}  // namespace

void scale_channels_forward(const Device& d, const float* x, const float* s, Shape xs, float* y) {
  if (xs.numel() == 0) return;
  channel_scale(context(d), x, s, xs, y);
}

void scale_channels_backward(const Device& d, const float* x, const float* s, Shape xs, const float* dy, float* dx,
                             float* ds) {
  if (xs.numel() == 0) return;
  CudaContext& ctx = context(d);
  if (dx) channel_scale(ctx, dy, s, xs, dx);
  if (ds) reduce_sample_channels(ctx, SumOp<ScaleGradTerm>{ScaleGradTerm{dy, x}, 1.0}, xs, ds);
}

void multiply_forward(const Device& d, const float* a, const float* b, int cb, long long P, int C, float* y) {
  if (P <= 0 || C <= 0) return;
  product(context(d), a, b, cb == 1 && C > 1, P, C, y);
}

void multiply_backward(const Device& d, const float* a, const float* b, int cb, long long P, int C, const float* dy,
                       float* da, float* db) {
  if (P <= 0 || C <= 0) return;
  CudaContext& ctx = context(d);
  const bool broadcast = cb == 1 && C > 1;
  if (da) product(ctx, dy, b, broadcast, P, C, da);
  if (!db) return;
  if (!broadcast) {
    product(ctx, dy, a, false, P, C, db);
    return;
  }
  channel_dot_kernel<<<grid_blocks(size_t(P)), kThreads, 0, ctx.stream()>>>(dy, a, P, C, db);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "multiply_backward");
}

}  // namespace trainer::cuda
