// Max-pooling gradient (see max_pool_backward.h): one thread per window and
// channel where the windows tile the input, else one per input element.
#include <algorithm>

#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/max_pool_backward.h"

namespace trainer::cuda {

namespace {

struct PoolGeometry {
  int H, W, C, Ho, Wo, kh, kw, sh, sw;
};

/// I: uint32_t when n <= 2^31 (64-bit division is many times slower on a GPU), else size_t.
template <class I>
__global__ void max_pool_backward_kernel(const float* x, const float* y, const float* dy, PoolGeometry g, I n,
                                         float* dx) {
  const I stride = I(gridDim.x) * I(blockDim.x);
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < n; i += stride) {
    const int c = int(i % I(g.C));
    I rest = i / I(g.C);
    const int w = int(rest % I(g.W));
    rest /= I(g.W);
    const int h = int(rest % I(g.H));
    const size_t b = size_t(rest / I(g.H));
    // Windows (oh, ow) with oh * sh <= h < oh * sh + kh (likewise for w).
    const int oh0 = h >= g.kh ? (h - g.kh) / g.sh + 1 : 0, oh1 = min(h / g.sh, g.Ho - 1);
    const int ow0 = w >= g.kw ? (w - g.kw) / g.sw + 1 : 0, ow1 = min(w / g.sw, g.Wo - 1);
    float sum = 0.f;
    for (int oh = oh0; oh <= oh1; ++oh) {
      for (int ow = ow0; ow <= ow1; ++ow) {
        const size_t o = ((b * g.Ho + oh) * g.Wo + ow) * g.C + c;
        const float m = y[o];
        // The window's first element equal to its maximum.
        int first = -1;
        for (int u = 0; u < g.kh && first < 0; ++u)
          for (int v = 0; v < g.kw; ++v)
            if (x[((b * g.H + oh * g.sh + u) * g.W + ow * g.sw + v) * g.C + c] == m) {
              first = u * g.kw + v;
              break;
            }
        if (first == (h - oh * g.sh) * g.kw + (w - ow * g.sw)) sum += dy[o];
      }
    }
    dx[i] = sum;
  }
}

/// Windows that tile x (strides = window, H = Ho * kh, W = Wo * kw: the
/// U-Net's 2x2 pooling): one thread per output element o finds its window's
/// first maximum and writes the window's kh * kw gradients (dy[o] there, 0
/// elsewhere), so x is read and dx written once, with no per-input-element
/// index arithmetic. I as in max_pool_backward_kernel.
template <class I>
__global__ void max_pool_tiled_backward_kernel(const float* x, const float* y, const float* dy, PoolGeometry g, I n,
                                               float* dx) {
  const I stride = I(gridDim.x) * I(blockDim.x);
  for (I o = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); o < n; o += stride) {
    const int c = int(o % I(g.C));
    I rest = o / I(g.C);
    const int ow = int(rest % I(g.Wo));
    rest /= I(g.Wo);
    const int oh = int(rest % I(g.Ho));
    const size_t b = size_t(rest / I(g.Ho));
    const float m = y[o], grad = dy[o];
    bool found = false;
    for (int u = 0; u < g.kh; ++u) {
      const size_t row = ((b * g.H + size_t(oh) * g.kh + u) * g.W + size_t(ow) * g.kw) * g.C + c;
      for (int v = 0; v < g.kw; ++v) {
        const size_t at = row + size_t(v) * g.C;
        const bool first = !found && x[at] == m;
        found = found || first;
        dx[at] = first ? grad : 0.f;
      }
    }
  }
}

}  // namespace

void max_pool_backward(CudaContext& ctx, const float* x, Shape xs, const float* y, const float* dy, Shape ys, int kh,
                       int kw, int sh, int sw, float* dx) {
  const size_t n = xs.numel();
  if (n == 0 || ys.numel() == 0) return;
  const PoolGeometry g{xs.h, xs.w, xs.c, ys.h, ys.w, kh, kw, sh, sw};
  const bool tiled = sh == kh && sw == kw && xs.h == ys.h * kh && xs.w == ys.w * kw;
  if (tiled) {
    const size_t m = ys.numel();
    if (n <= kMaxIndex32)
      max_pool_tiled_backward_kernel<uint32_t>
          <<<grid_blocks(m), kThreads, 0, ctx.stream()>>>(x, y, dy, g, uint32_t(m), dx);
    else
      max_pool_tiled_backward_kernel<size_t><<<grid_blocks(m), kThreads, 0, ctx.stream()>>>(x, y, dy, g, m, dx);
    TRAINER_CUDA_CHECK_LAUNCH(ctx, "max_pool_tiled_backward_kernel");
    return;
  }
  if (n <= kMaxIndex32 && ys.numel() <= kMaxIndex32)
    max_pool_backward_kernel<uint32_t><<<grid_blocks(n), kThreads, 0, ctx.stream()>>>(x, y, dy, g, uint32_t(n), dx);
  else
    max_pool_backward_kernel<size_t><<<grid_blocks(n), kThreads, 0, ctx.stream()>>>(x, y, dy, g, n, dx);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "max_pool_backward_kernel");
}

}  // namespace trainer::cuda
