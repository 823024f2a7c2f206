// Activation forward / backward on a GPU: in-place grid-stride kernels on the
// tower's compute stream (float4 accesses when the arrays are 16-byte
// aligned), per element through backend/elementwise_math.h.
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// y[i] <- f(y[i]) with f = relu_forward or sigmoid_forward.
template <Activation A>
struct ActivationForward {
  float* y;
  __device__ static float f(float v) { return A == Activation::Relu ? relu_forward(v) : sigmoid_forward(v); }
  template <class I>
  __device__ void one(I i) const {
    y[i] = f(y[i]);
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 v = load4(y, j);
    v.x = f(v.x), v.y = f(v.y), v.z = f(v.z), v.w = f(v.w);
    store4(y, j, v);
  }
};

/// dy[i] <- f'(y[i]) * dy[i] with f' = relu_backward or sigmoid_backward.
template <Activation A>
struct ActivationBackward {
  const float* y;
  const float* dy;
  float* dx;
  __device__ static float f(float out, float g) {
    return A == Activation::Relu ? relu_backward(out, g) : sigmoid_backward(out, g);
  }
  template <class I>
  __device__ void one(I i) const {
    dx[i] = f(y[i], dy[i]);
  }
  template <class I>
  __device__ void quad(I j) const {
    const float4 o = load4(y, j);
    float4 g = load4(dy, j);
    g.x = f(o.x, g.x), g.y = f(o.y, g.y), g.z = f(o.z, g.z), g.w = f(o.w, g.w);
    store4(dx, j, g);
  }
};

}  // namespace

void activation_forward(const Device& d, Activation a, float* y, size_t n) {
  if (a == Activation::Linear || n == 0) return;
  CudaContext& ctx = context(d);
  const bool vec = aligned16(y);
  if (a == Activation::Relu) {
    launch_elementwise(ctx.stream(), ActivationForward<Activation::Relu>{y}, n, vec);
    TRAINER_CUDA_CHECK_LAUNCH(ctx, "relu_forward");
  } else {
    launch_elementwise(ctx.stream(), ActivationForward<Activation::Sigmoid>{y}, n, vec);
    TRAINER_CUDA_CHECK_LAUNCH(ctx, "sigmoid_forward");
  }
}

void activation_backward(const Device& d, Activation a, const float* y, const float* dy, float* dx, size_t n) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  if (a == Activation::Linear) {
    if (dx != dy) TRAINER_CUDA_CHECK(ctx, cudaMemcpyAsync(dx, dy, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream()));
    return;
  }
  const bool vec = aligned16(y, dy, dx);
  if (a == Activation::Relu) {
    launch_elementwise(ctx.stream(), ActivationBackward<Activation::Relu>{y, dy, dx}, n, vec);
    TRAINER_CUDA_CHECK_LAUNCH(ctx, "relu_backward");
  } else {
    launch_elementwise(ctx.stream(), ActivationBackward<Activation::Sigmoid>{y, dy, dx}, n, vec);
    TRAINER_CUDA_CHECK_LAUNCH(ctx, "sigmoid_backward");
  }
}

}  // namespace trainer::cuda
