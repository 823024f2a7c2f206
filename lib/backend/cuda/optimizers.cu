// Optimizer updates on a GPU: one grid-stride kernel per step over the n
// parameters (float4 accesses when every array is 16-byte aligned), on the
// tower's compute stream, per element through backend/train_math.h.
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cuda {

namespace {

/// w[i] -= lr * g[i] (the CPU's expression).
struct SgdStep {
  float* w;
  const float* g;
  float lr;
  template <class I>
  __device__ void one(I i) const {
    w[i] -= lr * g[i];
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 a = load4(w, j);
    const float4 b = load4(g, j);
    a.x -= lr * b.x, a.y -= lr * b.y, a.z -= lr * b.z, a.w -= lr * b.w;
    store4(w, j, a);
  }
};

/// sgd_momentum_update on every element.
struct SgdMomentumStep {
  float* w;
  float* vel;
  const float* g;
  float lr, momentum;
  bool nesterov;
  template <class I>
  __device__ void one(I i) const {
    sgd_momentum_update(w[i], vel[i], g[i], lr, momentum, nesterov);
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 a = load4(w, j), v = load4(vel, j);
    const float4 b = load4(g, j);
    sgd_momentum_update(a.x, v.x, b.x, lr, momentum, nesterov);
    sgd_momentum_update(a.y, v.y, b.y, lr, momentum, nesterov);
    sgd_momentum_update(a.z, v.z, b.z, lr, momentum, nesterov);
    sgd_momentum_update(a.w, v.w, b.w, lr, momentum, nesterov);
    store4(w, j, a), store4(vel, j, v);
  }
};

/// adam_update on every element.
struct AdamStep {
  float* w;
  float* m;
  float* v;
  const float* g;
  float lr_t, b1, b2, epsilon;
  template <class I>
  __device__ void one(I i) const {
    adam_update(w[i], m[i], v[i], g[i], lr_t, b1, b2, epsilon);
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 a = load4(w, j), mm = load4(m, j), vv = load4(v, j);
    const float4 b = load4(g, j);
    adam_update(a.x, mm.x, vv.x, b.x, lr_t, b1, b2, epsilon);
    adam_update(a.y, mm.y, vv.y, b.y, lr_t, b1, b2, epsilon);
    adam_update(a.z, mm.z, vv.z, b.z, lr_t, b1, b2, epsilon);
    adam_update(a.w, mm.w, vv.w, b.w, lr_t, b1, b2, epsilon);
    store4(w, j, a), store4(m, j, mm), store4(v, j, vv);
  }
};

/// rmsprop_update on every element.
struct RmspropStep {
  float* w;
  float* rms;
  const float* g;
  float lr, rho, epsilon;
  template <class I>
  __device__ void one(I i) const {
    rmsprop_update(w[i], rms[i], g[i], lr, rho, epsilon);
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 a = load4(w, j), r = load4(rms, j);
    const float4 b = load4(g, j);
    rmsprop_update(a.x, r.x, b.x, lr, rho, epsilon);
    rmsprop_update(a.y, r.y, b.y, lr, rho, epsilon);
    rmsprop_update(a.z, r.z, b.z, lr, rho, epsilon);
    rmsprop_update(a.w, r.w, b.w, lr, rho, epsilon);
    store4(w, j, a), store4(rms, j, r);
  }
};

/// rmsprop_momentum_update on every element.
struct RmspropMomentumStep {
  float* w;
  float* rms;
  float* mom;
  const float* g;
  float lr, rho, momentum, epsilon;
  template <class I>
  __device__ void one(I i) const {
    rmsprop_momentum_update(w[i], rms[i], mom[i], g[i], lr, rho, momentum, epsilon);
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 a = load4(w, j), r = load4(rms, j), u = load4(mom, j);
    const float4 b = load4(g, j);
    rmsprop_momentum_update(a.x, r.x, u.x, b.x, lr, rho, momentum, epsilon);
    rmsprop_momentum_update(a.y, r.y, u.y, b.y, lr, rho, momentum, epsilon);
    rmsprop_momentum_update(a.z, r.z, u.z, b.z, lr, rho, momentum, epsilon);
    rmsprop_momentum_update(a.w, r.w, u.w, b.w, lr, rho, momentum, epsilon);
    store4(w, j, a), store4(rms, j, r), store4(mom, j, u);
  }
};

}  // namespace

void sgd_step(const Device& d, float* w, const float* g, size_t n, float lr) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), SgdStep{w, g, lr}, n, aligned16(w, g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "sgd_step");
}

void sgd_momentum_step(const Device& d, float* w, float* velocity, const float* g, size_t n, float lr,
                       float momentum, bool nesterov) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), SgdMomentumStep{w, velocity, g, lr, momentum, nesterov}, n,
                     aligned16(w, velocity, g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "sgd_momentum_step");
}

void adam_step(const Device& d, float* w, float* m, float* v, const float* g, size_t n, float lr_t, float b1,
               float b2, float epsilon) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), AdamStep{w, m, v, g, lr_t, b1, b2, epsilon}, n, aligned16(w, m, v, g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "adam_step");
}

void rmsprop_step(const Device& d, float* w, float* rms, const float* g, size_t n, float lr, float rho,
                  float epsilon) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), RmspropStep{w, rms, g, lr, rho, epsilon}, n, aligned16(w, rms, g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "rmsprop_step");
}

void rmsprop_momentum_step(const Device& d, float* w, float* rms, float* mom, const float* g, size_t n,
                           float lr, float rho, float momentum, float epsilon) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), RmspropMomentumStep{w, rms, mom, g, lr, rho, momentum, epsilon}, n,
                     aligned16(w, rms, mom, g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "rmsprop_momentum_step");
}

}  // namespace trainer::cuda
