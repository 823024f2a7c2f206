// Bilinear UpSampling2D forward / backward on a GPU, on the tower's compute
// stream: one thread per output element (forward) or input element
// (backward: it gathers its weighted share of every output pixel that reads
// it, no atomics), each through backend/elementwise_math.h's bilinear
// functions in the CPU's order and without FMA contraction, so both devices
// give the same bits. fp32 tensors only (the layer keeps fp32 activations).
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

__global__ void upsample_bilinear_forward_kernel(const float* x, Shape xs, int oh, int ow, float* y, size_t total) {
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const NhwcIndex o = nhwc_index(e, oh, ow, xs.c);
    const BilinearTap ty = bilinear_tap(o.h, xs.h, oh), tx = bilinear_tap(o.w, xs.w, ow);
    auto at = [&](int h, int w) { return x[((size_t(o.n) * xs.h + h) * xs.w + w) * xs.c + o.c]; };
    const float t = bilinear_lerp(at(ty.lo, tx.lo), at(ty.lo, tx.hi), tx.frac);
    const float b = bilinear_lerp(at(ty.hi, tx.lo), at(ty.hi, tx.hi), tx.frac);
    y[e] = bilinear_lerp(t, b, ty.frac);
  }
}

__global__ void upsample_bilinear_backward_kernel(const float* dy, Shape xs, int sh, int sw, float* dx, size_t total) {
  const int oh = xs.h * sh, ow = xs.w * sw;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const NhwcIndex in = nhwc_index(e, xs.h, xs.w, xs.c);
    int i0, i1, j0, j1;
    bilinear_outputs(in.h, sh, oh, i0, i1);
    bilinear_outputs(in.w, sw, ow, j0, j1);
    float acc = 0.f;
    for (int a = i0; a < i1; ++a) {
      const float wy = bilinear_weight(bilinear_tap(a, xs.h, oh), in.h);
      if (wy == 0.f) continue;
      for (int b = j0; b < j1; ++b) {
        const float wx = bilinear_weight(bilinear_tap(b, xs.w, ow), in.w);
        if (wx == 0.f) continue;
        acc = add_rn(acc, mul_rn(mul_rn(dy[((size_t(in.n) * oh + a) * ow + b) * xs.c + in.c], wy), wx));
      }
    }
    dx[e] = acc;
  }
}

}  // namespace

void upsample_bilinear_forward(const Device& d, const float* x, Shape xs, UpSample2DParams p, float* y) {
  const int oh = xs.h * p.sh, ow = xs.w * p.sw;
  const size_t total = size_t(xs.n) * size_t(oh) * size_t(ow) * size_t(xs.c);
  if (total == 0) return;
  CudaContext& ctx = context(d);
  upsample_bilinear_forward_kernel<<<grid_blocks(total), kThreads, 0, ctx.stream()>>>(x, xs, oh, ow, y, total);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "upsample_bilinear_forward");
}

void upsample_bilinear_backward(const Device& d, const float* dy, Shape xs, UpSample2DParams p, float* dx) {
  const size_t total = xs.numel();
  if (total == 0) return;
  CudaContext& ctx = context(d);
  upsample_bilinear_backward_kernel<<<grid_blocks(total), kThreads, 0, ctx.stream()>>>(dy, xs, p.sh, p.sw, dx, total);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "upsample_bilinear_backward");
}

}  // namespace trainer::cuda
