// Add and gradient accumulation on a GPU: grid-stride kernels on the tower's
// compute stream (float4 accesses, or pairs of bf16, when every array is
// 16-byte aligned). Accumulation takes fp32 or bf16 tensors (a bf16 tower's
// activation gradients): bf16 sums are taken in fp32 and rounded to nearest even.
//
// add_forward passes the input pointers by value in the kernel's argument
// (AddChunk, up to kAddInputs of them), so the host array xs may be reused as
// soon as the call returns. More inputs are added by further launches that
// start from y: y = (x0 + ... + x7), then y = ((y + x8) + ... + x14), ...,
// which is the CPU's left-to-right order ((x0 + x1) + x2) + ... exactly.
// A [1, 1, C] input's values are added by a grid-stride kernel; their
// gradient is the deterministic reduction of sample_channel_reduce.cuh.
#include <cuda_bf16.h>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/sample_channel_reduce.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// Inputs of one add launch.
constexpr int kAddInputs = 8;

/// y[i] <- ((x[0][i] + x[1][i]) + x[2][i]) + ... over the first k pointers of x
/// (x[0] may be y itself: each element is read before it is written by the same thread).
struct AddChunk {
  const float* x[kAddInputs];
  int k;
  float* y;
  template <class I>
  __device__ void one(I i) const {
    float s = x[0][i];
#pragma unroll  // constant indices keep the pointers in the parameter bank
    for (int t = 1; t < kAddInputs; ++t)
      if (t < k) s += x[t][i];
    y[i] = s;
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 s = load4(x[0], j);
#pragma unroll
    for (int t = 1; t < kAddInputs; ++t)
      if (t < k) {
        const float4 v = load4(x[t], j);
        s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
      }
    store4(y, j, s);
  }
};

/// y[i] <- y[i] + x[i] (T: float, or __nv_bfloat16 with the sum taken in
/// fp32 and rounded to nearest even); quad() with float4 or 8-byte bf16 accesses.
template <class T>
struct Accumulate {
  T* y;
  const T* x;
  template <class I>
  __device__ void one(I i) const {
    y[i] = from_float<T>(to_float(y[i]) + to_float(x[i]));
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 s = load4(y, j);
    const float4 v = load4(x, j);
    s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    store4(y, j, s);
  }
};

/// x + s, one value per (sample, channel).
struct Plus {
  __device__ float operator()(float x, float s) const { return x + s; }
};

}  // namespace

void add_channels_forward(const Device& d, const float* x, const float* s, Shape xs, float* y) {
  if (xs.numel() == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), RowBroadcast<Plus>{x, s, y, xs.sample_numel(), (unsigned long long)xs.c, {}},
                     xs.numel(), false);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "add_channels_forward");
}

void channel_sums(const Device& d, const float* x, Shape xs, float* out) {
  reduce_sample_channels(context(d), SumOp<Element>{Element{x}, 1.0}, xs, out);
}

void add_forward(const Device& d, const float* const* xs, size_t k, float* y, size_t n) {
  if (n == 0 || k == 0) return;
  CudaContext& ctx = context(d);
  bool vec = aligned16(y);
  for (size_t t = 0; t < k; ++t) vec = vec && aligned16(xs[t]);
  size_t next = 0;  // the next input to add
  while (next < k) {
    AddChunk f{};
    f.y = y;
    if (next > 0) f.x[f.k++] = y;  // continue from the sum so far
    while (f.k < kAddInputs && next < k) f.x[f.k++] = xs[next++];
    launch_elementwise(ctx.stream(), f, n, vec);
    TRAINER_CUDA_CHECK_LAUNCH(ctx, "add_forward");
  }
}

void accumulate(const Device& d, DType t, void* y, const void* x, size_t n) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  const bool vec = aligned16(y, x);
  using B = __nv_bfloat16;
  if (t == DType::BF16)
    launch_elementwise(ctx.stream(), Accumulate<B>{static_cast<B*>(y), static_cast<const B*>(x)}, n, vec);
  else
    launch_elementwise(ctx.stream(), Accumulate<float>{static_cast<float*>(y), static_cast<const float*>(x)}, n, vec);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "accumulate");
}

}  // namespace trainer::cuda
