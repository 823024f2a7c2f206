// Rescaling forward / backward on a GPU: grid-stride kernels on the tower's
// compute stream (float4 accesses when the arrays are 16-byte aligned), per
// element through backend/elementwise_math.h.
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// y[i] <- scale_shift(x[i], scale, offset); y may be x.
struct ScaleShift {
  const float* x;
  float* y;
  float scale, offset;
  __device__ float f(float v) const { return scale_shift(v, scale, offset); }
  template <class I>
  __device__ void one(I i) const {
    y[i] = f(x[i]);
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 v = load4(x, j);
    v.x = f(v.x), v.y = f(v.y), v.z = f(v.z), v.w = f(v.w);
    store4(y, j, v);
  }
};

/// dx[i] <- dy[i] * scale (the CPU's expression); dx may be dy.
struct ScaleBackward {
  const float* dy;
  float* dx;
  float scale;
  template <class I>
  __device__ void one(I i) const {
    dx[i] = dy[i] * scale;
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 v = load4(dy, j);
    v.x = v.x * scale, v.y = v.y * scale, v.z = v.z * scale, v.w = v.w * scale;
    store4(dx, j, v);
  }
};

}  // namespace

void scale_shift_forward(const Device& d, const float* x, float scale, float offset, float* y, size_t n) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), ScaleShift{x, y, scale, offset}, n, aligned16(x, y));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "scale_shift_forward");
}

void scale_backward(const Device& d, const float* dy, float scale, float* dx, size_t n) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), ScaleBackward{dy, dx, scale}, n, aligned16(dy, dx));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "scale_backward");
}

}  // namespace trainer::cuda
