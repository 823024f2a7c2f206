// Max-pooling gradient (see max_pool_backward.h): one thread per input element.
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

}  // namespace

void max_pool_backward(CudaContext& ctx, const float* x, Shape xs, const float* y, const float* dy, Shape ys, int kh,
                       int kw, int sh, int sw, float* dx) {
  const size_t n = xs.numel();
  if (n == 0 || ys.numel() == 0) return;
  const PoolGeometry g{xs.h, xs.w, xs.c, ys.h, ys.w, kh, kw, sh, sw};
  if (n <= kMaxIndex32 && ys.numel() <= kMaxIndex32)
    max_pool_backward_kernel<uint32_t><<<grid_blocks(n), kThreads, 0, ctx.stream()>>>(x, y, dy, g, uint32_t(n), dx);
  else
    max_pool_backward_kernel<size_t><<<grid_blocks(n), kThreads, 0, ctx.stream()>>>(x, y, dy, g, n, dx);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "max_pool_backward_kernel");
}

}  // namespace trainer::cuda
