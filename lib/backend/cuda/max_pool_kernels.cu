// Max-pooling kernels (see max_pool_kernels.h): forward one thread per output
// element; the gradient one thread per window and channel where the windows
// tile the input, else one per input element.
#include <algorithm>
#include <cmath>

#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/max_pool_kernels.h"

namespace trainer::cuda {

namespace {

struct PoolGeometry {
  int H, W, C, Ho, Wo, kh, kw, sh, sw;
};

/// The sample b, window (oh, ow) and channel c of output element o [N, Ho, Wo, C].
struct Window {
  size_t b;
  int oh, ow, c;
};
template <class I>
__device__ inline Window window_of(I o, const PoolGeometry& g) {
  Window w;
  w.c = int(o % I(g.C));
  I rest = o / I(g.C);
  w.ow = int(rest % I(g.Wo));
  rest /= I(g.Wo);
  w.oh = int(rest % I(g.Ho));
  w.b = size_t(rest / I(g.Ho));
  return w;
}

/// One thread per output element o: y[o] = the window's maximum, NaN when it
/// holds one (T and I as in max_pool_backward_kernel).
template <class T, class I>
__global__ void max_pool_forward_kernel(const T* x, PoolGeometry g, I n, T* y) {
  const I stride = I(gridDim.x) * I(blockDim.x);
  for (I o = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); o < n; o += stride) {
    const Window at = window_of(o, g);
    float m = -INFINITY;
    for (int u = 0; u < g.kh; ++u) {
      const size_t row =
          ((at.b * g.H + size_t(at.oh) * g.sh + u) * g.W + size_t(at.ow) * g.sw) * g.C + at.c;
      for (int v = 0; v < g.kw; ++v) {
        const float e = to_float(x[row + size_t(v) * g.C]);
        if (isnan(e) || e > m) m = e;  // a NaN stays: nothing compares greater
      }
    }
    y[o] = from_float<T>(m);
  }
}

/// T: the tensors' type (float or __nv_bfloat16); I: uint32_t when n <= 2^31
/// (64-bit division is many times slower on a GPU), else size_t.
template <class T, class I>
__global__ void max_pool_backward_kernel(const T* x, const T* y, const T* dy, PoolGeometry g, I n, T* dx) {
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
        const float m = to_float(y[o]);
        // The window's first element equal to its maximum.
        int first = -1;
        for (int u = 0; u < g.kh && first < 0; ++u)
          for (int v = 0; v < g.kw; ++v)
            if (to_float(x[((b * g.H + oh * g.sh + u) * g.W + ow * g.sw + v) * g.C + c]) == m) {
              first = u * g.kw + v;
              break;
            }
        if (first == (h - oh * g.sh) * g.kw + (w - ow * g.sw)) sum += to_float(dy[o]);
      }
    }
    dx[i] = from_float<T>(sum);
  }
}

/// Windows that tile x (strides = window, H = Ho * kh, W = Wo * kw: the
/// U-Net's 2x2 pooling): one thread per output element o finds its window's
/// first maximum and writes the window's kh * kw gradients (dy[o] there, 0
/// elsewhere), so x is read and dx written once, with no per-input-element
/// index arithmetic. T and I as in max_pool_backward_kernel.
template <class T, class I>
__global__ void max_pool_tiled_backward_kernel(const T* x, const T* y, const T* dy, PoolGeometry g, I n, T* dx) {
  const I stride = I(gridDim.x) * I(blockDim.x);
  for (I o = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); o < n; o += stride) {
    const Window w = window_of(o, g);
    const float m = to_float(y[o]);
    const T grad = dy[o], zero = from_float<T>(0.f);
    bool found = false;
    for (int u = 0; u < g.kh; ++u) {
      const size_t row = ((w.b * g.H + size_t(w.oh) * g.kh + u) * g.W + size_t(w.ow) * g.kw) * g.C + w.c;
      for (int v = 0; v < g.kw; ++v) {
        const size_t at = row + size_t(v) * g.C;
        const bool first = !found && to_float(x[at]) == m;
        found = found || first;
        dx[at] = first ? grad : zero;
      }
    }
  }
}

/// Queues the forward kernel on tensors of type T.
template <class T>
void launch_forward(CudaContext& ctx, const T* x, Shape xs, T* y, Shape ys, const PoolGeometry& g) {
  const size_t m = ys.numel();
  if (xs.numel() <= kMaxIndex32)
    max_pool_forward_kernel<T, uint32_t><<<grid_blocks(m), kThreads, 0, ctx.stream()>>>(x, g, uint32_t(m), y);
  else
    max_pool_forward_kernel<T, size_t><<<grid_blocks(m), kThreads, 0, ctx.stream()>>>(x, g, m, y);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "max_pool_forward_kernel");
}

/// Queues the gradient kernel for the geometry (see max_pool_backward) on tensors of type T.
template <class T>
void launch(CudaContext& ctx, const T* x, Shape xs, const T* y, const T* dy, Shape ys, const PoolGeometry& g, T* dx) {
  const size_t n = xs.numel();
  const bool tiled = g.sh == g.kh && g.sw == g.kw && xs.h == ys.h * g.kh && xs.w == ys.w * g.kw;
  if (tiled) {
    const size_t m = ys.numel();
    if (n <= kMaxIndex32)
      max_pool_tiled_backward_kernel<T, uint32_t>
          <<<grid_blocks(m), kThreads, 0, ctx.stream()>>>(x, y, dy, g, uint32_t(m), dx);
    else
      max_pool_tiled_backward_kernel<T, size_t><<<grid_blocks(m), kThreads, 0, ctx.stream()>>>(x, y, dy, g, m, dx);
    TRAINER_CUDA_CHECK_LAUNCH(ctx, "max_pool_tiled_backward_kernel");
    return;
  }
  if (n <= kMaxIndex32 && ys.numel() <= kMaxIndex32)
    max_pool_backward_kernel<T, uint32_t><<<grid_blocks(n), kThreads, 0, ctx.stream()>>>(x, y, dy, g, uint32_t(n), dx);
  else
    max_pool_backward_kernel<T, size_t><<<grid_blocks(n), kThreads, 0, ctx.stream()>>>(x, y, dy, g, n, dx);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "max_pool_backward_kernel");
}

}  // namespace

void max_pool_forward(CudaContext& ctx, DType t, const void* x, Shape xs, void* y, Shape ys, int kh, int kw, int sh,
                      int sw) {
  if (xs.numel() == 0 || ys.numel() == 0) return;
  const PoolGeometry g{xs.h, xs.w, xs.c, ys.h, ys.w, kh, kw, sh, sw};
  if (t == DType::BF16)
    launch_forward(ctx, static_cast<const __nv_bfloat16*>(x), xs, static_cast<__nv_bfloat16*>(y), ys, g);
  else
    launch_forward(ctx, static_cast<const float*>(x), xs, static_cast<float*>(y), ys, g);
}

void max_pool_backward(CudaContext& ctx, DType t, const void* x, Shape xs, const void* y, const void* dy, Shape ys,
                       int kh, int kw, int sh, int sw, void* dx) {
  if (xs.numel() == 0 || ys.numel() == 0) return;
  const PoolGeometry g{xs.h, xs.w, xs.c, ys.h, ys.w, kh, kw, sh, sw};
  if (t == DType::BF16) {
    using B = __nv_bfloat16;
    launch(ctx, static_cast<const B*>(x), xs, static_cast<const B*>(y), static_cast<const B*>(dy), ys, g,
           static_cast<B*>(dx));
  } else {
    launch(ctx, static_cast<const float*>(x), xs, static_cast<const float*>(y), static_cast<const float*>(dy), ys, g,
           static_cast<float*>(dx));
  }
}

}  // namespace trainer::cuda
