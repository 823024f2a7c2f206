// AveragePooling2D forward / backward on a GPU, on the tower's compute
// stream: one thread per output element (forward) or input element
// (backward), each summing its window (or its windows' shares) in the CPU's
// order, through backend/elementwise_math.h, so both devices give the same
// bits. fp32 tensors only (the layer keeps fp32 activations).
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// One output element per thread (grid-stride over N * Ho * Wo * C).
__global__ void avg_pool_forward_kernel(const float* x, Shape xs, Pool2DParams p, int pad_top, int pad_left,
                                        float* y, Shape ys, size_t total) {
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const NhwcIndex o = nhwc_index(e, ys.h, ys.w, ys.c);
    const int n = o.n, oh = o.h, ow = o.w, c = o.c;
    int h0, h1, w0, w1;
    pool_window(oh, p.ph, p.stride_h, pad_top, xs.h, h0, h1);
    pool_window(ow, p.pw, p.stride_w, pad_left, xs.w, w0, w1);
    float sum = 0.f;
    for (int i = h0; i < h1; ++i)
      for (int j = w0; j < w1; ++j) sum += x[((size_t(n) * xs.h + i) * xs.w + j) * xs.c + c];
    y[e] = sum / float((h1 - h0) * (w1 - w0));
  }
}

/// One input element per thread (grid-stride over N * H * W * C).
__global__ void avg_pool_backward_kernel(const float* dy, Shape ys, Pool2DParams p, int pad_top, int pad_left,
                                         float* dx, Shape xs, size_t total) {
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const NhwcIndex in = nhwc_index(e, xs.h, xs.w, xs.c);
    const int n = in.n, i = in.h, j = in.w, c = in.c;
    int o0, o1, q0, q1;
    pool_outputs(i, p.ph, p.stride_h, pad_top, ys.h, o0, o1);
    pool_outputs(j, p.pw, p.stride_w, pad_left, ys.w, q0, q1);
    float sum = 0.f;
    for (int oh = o0; oh < o1; ++oh) {
      int h0, h1;
      pool_window(oh, p.ph, p.stride_h, pad_top, xs.h, h0, h1);
      for (int ow = q0; ow < q1; ++ow) {
        int w0, w1;
        pool_window(ow, p.pw, p.stride_w, pad_left, xs.w, w0, w1);
        sum += dy[((size_t(n) * ys.h + oh) * ys.w + ow) * ys.c + c] / float((h1 - h0) * (w1 - w0));
      }
    }
    dx[e] = sum;
  }
}

}  // namespace

void avg_pool_forward(const Device& d, const float* x, Shape xs, Pool2DParams p, PadPair pad_h, PadPair pad_w,
                      float* y, Shape ys) {
  const size_t total = ys.numel();
  if (total == 0) return;
  CudaContext& ctx = context(d);
  avg_pool_forward_kernel<<<grid_blocks(total), kThreads, 0, ctx.stream()>>>(x, xs, p, pad_h.before, pad_w.before,
                                                                             y, ys, total);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "avg_pool_forward");
}

void avg_pool_backward(const Device& d, const float* dy, Shape ys, Pool2DParams p, PadPair pad_h, PadPair pad_w,
                       float* dx, Shape xs) {
  const size_t total = xs.numel();
  if (total == 0) return;
  CudaContext& ctx = context(d);
  avg_pool_backward_kernel<<<grid_blocks(total), kThreads, 0, ctx.stream()>>>(dy, ys, p, pad_h.before,
                                                                              pad_w.before, dx, xs, total);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "avg_pool_backward");
}

}  // namespace trainer::cuda
