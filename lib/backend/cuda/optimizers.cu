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

/// adam_update on every element, or amsgrad_update when v_hat is not null.
struct AdamStep {
  float* w;
  float* m;
  float* v;
  float* v_hat;
  const float* g;
  float lr_t, b1, b2, epsilon;
  __device__ void update(float& a, float& mm, float& vv, float* vh, float b) const {
    if (vh) amsgrad_update(a, mm, vv, *vh, b, lr_t, b1, b2, epsilon);
    else adam_update(a, mm, vv, b, lr_t, b1, b2, epsilon);
  }
  template <class I>
  __device__ void one(I i) const {
    update(w[i], m[i], v[i], v_hat ? v_hat + i : nullptr, g[i]);
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 a = load4(w, j), mm = load4(m, j), vv = load4(v, j), vh = v_hat ? load4(v_hat, j) : float4{};
    const float4 b = load4(g, j);
    update(a.x, mm.x, vv.x, v_hat ? &vh.x : nullptr, b.x);
    update(a.y, mm.y, vv.y, v_hat ? &vh.y : nullptr, b.y);
    update(a.z, mm.z, vv.z, v_hat ? &vh.z : nullptr, b.z);
    update(a.w, mm.w, vv.w, v_hat ? &vh.w : nullptr, b.w);
    store4(w, j, a), store4(m, j, mm), store4(v, j, vv);
    if (v_hat) store4(v_hat, j, vh);
  }
};

/// rmsprop_update on every element (centered when mg is not null).
struct RmspropStep {
  float* w;
  float* rms;
  float* mg;
  const float* g;
  float lr, rho, epsilon;
  template <class I>
  __device__ void one(I i) const {
    rmsprop_update(w[i], rms[i], mg ? mg + i : nullptr, g[i], lr, rho, epsilon);
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 a = load4(w, j), r = load4(rms, j), c = mg ? load4(mg, j) : float4{};
    const float4 b = load4(g, j);
    rmsprop_update(a.x, r.x, mg ? &c.x : nullptr, b.x, lr, rho, epsilon);
    rmsprop_update(a.y, r.y, mg ? &c.y : nullptr, b.y, lr, rho, epsilon);
    rmsprop_update(a.z, r.z, mg ? &c.z : nullptr, b.z, lr, rho, epsilon);
    rmsprop_update(a.w, r.w, mg ? &c.w : nullptr, b.w, lr, rho, epsilon);
    store4(w, j, a), store4(rms, j, r);
    if (mg) store4(mg, j, c);
  }
};

/// rmsprop_momentum_update on every element (centered when mg is not null).
struct RmspropMomentumStep {
  float* w;
  float* rms;
  float* mg;
  float* mom;
  const float* g;
  float lr, rho, momentum, epsilon;
  template <class I>
  __device__ void one(I i) const {
    rmsprop_momentum_update(w[i], rms[i], mg ? mg + i : nullptr, mom[i], g[i], lr, rho, momentum, epsilon);
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 a = load4(w, j), r = load4(rms, j), u = load4(mom, j), c = mg ? load4(mg, j) : float4{};
    const float4 b = load4(g, j);
    rmsprop_momentum_update(a.x, r.x, mg ? &c.x : nullptr, u.x, b.x, lr, rho, momentum, epsilon);
    rmsprop_momentum_update(a.y, r.y, mg ? &c.y : nullptr, u.y, b.y, lr, rho, momentum, epsilon);
    rmsprop_momentum_update(a.z, r.z, mg ? &c.z : nullptr, u.z, b.z, lr, rho, momentum, epsilon);
    rmsprop_momentum_update(a.w, r.w, mg ? &c.w : nullptr, u.w, b.w, lr, rho, momentum, epsilon);
    store4(w, j, a), store4(rms, j, r), store4(mom, j, u);
    if (mg) store4(mg, j, c);
  }
};

}  // namespace

void sgd_step(const Device& d, const OptimizerArrays& a, SgdParams p) {
  if (a.n == 0) return;
  CudaContext& ctx = context(d);
  if (!a.momentum)
    launch_elementwise(ctx.stream(), SgdStep{a.w, a.g, p.lr}, a.n, aligned16(a.w, a.g));
  else
    launch_elementwise(ctx.stream(), SgdMomentumStep{a.w, a.momentum, a.g, p.lr, p.momentum, p.nesterov}, a.n,
                       aligned16(a.w, a.momentum, a.g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "sgd_step");
}

void adam_step(const Device& d, const OptimizerArrays& a, AdamParams p) {
  if (a.n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), AdamStep{a.w, a.m, a.v, a.v_hat, a.g, p.lr_t, p.beta_1, p.beta_2, p.epsilon}, a.n,
                     aligned16(a.w, a.m, a.v, a.v_hat, a.g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "adam_step");
}

void rmsprop_step(const Device& d, const OptimizerArrays& a, RmspropParams p) {
  if (a.n == 0) return;
  CudaContext& ctx = context(d);
  if (!a.momentum)
    launch_elementwise(ctx.stream(), RmspropStep{a.w, a.rms, a.mg, a.g, p.lr, p.rho, p.epsilon}, a.n,
                       aligned16(a.w, a.rms, a.mg, a.g));
  else
    launch_elementwise(ctx.stream(),
                       RmspropMomentumStep{a.w, a.rms, a.mg, a.momentum, a.g, p.lr, p.rho, p.momentum, p.epsilon}, a.n,
                       aligned16(a.w, a.rms, a.mg, a.momentum, a.g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "rmsprop_step");
}

}  // namespace trainer::cuda
