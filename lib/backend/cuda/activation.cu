// Activation forward / backward on a GPU: in-place grid-stride kernels on the
// tower's compute stream (float4 accesses when the arrays are 16-byte
// aligned), per element through backend/elementwise_math.h, one kernel per
// activation kind (with_kind).
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// y[i] <- f(y[i]) with f = activation_value of kind K.
template <ActivationKind K>
struct ActivationForward {
  float* y;
  float alpha, beta;
  __device__ float f(float v) const { return activation_value(Activation{K, alpha, beta}, v); }
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

/// dx[i] <- activation_dx of kind K from v[i] (the output, or the input for
/// the kinds that need it) and dy[i].
template <ActivationKind K>
struct ActivationBackward {
  const float* v;
  const float* dy;
  float* dx;
  float alpha, beta;
  __device__ float f(float value, float g) const { return activation_dx(Activation{K, alpha, beta}, value, g); }
  template <class I>
  __device__ void one(I i) const {
    dx[i] = f(v[i], dy[i]);
  }
  template <class I>
  __device__ void quad(I j) const {
    const float4 o = load4(v, j);
    float4 g = load4(dy, j);
    g.x = f(o.x, g.x), g.y = f(o.y, g.y), g.z = f(o.z, g.z), g.w = f(o.w, g.w);
    store4(dx, j, g);
  }
};

}  // namespace

void activation_forward(const Device& d, Activation a, float* y, size_t n) {
  if (a.linear() || n == 0) return;
  CudaContext& ctx = context(d);
  const bool vec = aligned16(y);
  with_kind(a.kind, [&](auto k) {
    launch_elementwise(ctx.stream(), ActivationForward<decltype(k)::value>{y, a.alpha, a.beta}, n, vec);
  });
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "activation_forward");
}

void activation_backward(const Device& d, Activation a, const float* v, const float* dy, float* dx, size_t n) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  if (a.linear()) {
    if (dx != dy) TRAINER_CUDA_CHECK(ctx, cudaMemcpyAsync(dx, dy, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream()));
    return;
  }
  const bool vec = aligned16(v, dy, dx);
  with_kind(a.kind, [&](auto k) {
    launch_elementwise(ctx.stream(), ActivationBackward<decltype(k)::value>{v, dy, dx, a.alpha, a.beta}, n, vec);
  });
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "activation_backward");
}

}  // namespace trainer::cuda
