// Nearest-neighbour UpSampling2D forward / backward on a GPU: one thread per
// output element (per float4 of channels when C % 4 == 0 and the arrays are
// 16-byte aligned) on the tower's compute stream. The backward pass gathers:
// each dx element sums its sh x sw block of dy itself (no atomics), in the
// CPU's order (block rows outer, columns inner, starting from 0).
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// y [N, H*sh, W*sw, C] <- x [N, H, W, C] at (i / sh, j / sw).
struct UpsampleForward {
  const float* x;
  float* y;
  int H, W, C, sh, sw;
  /// Index in x of output element e, both counted in units of C / cu channels (cu = C for floats, C / 4 for float4s).
  template <class I>
  __device__ size_t source(I e, I cu) const {
    const I ow = I(W) * I(sw), oh = I(H) * I(sh);
    const I ch = e % cu, pix = e / cu, j = pix % ow, row = pix / ow;  // row = n * oh + i
    const I i = row % oh, n = row / oh;
    return ((size_t(n) * H + i / I(sh)) * W + j / I(sw)) * cu + ch;
  }
  template <class I>
  __device__ void one(I e) const {
    y[e] = x[source(e, I(C))];
  }
  template <class I>
  __device__ void quad(I e) const {
    store4(y, e, load4(x, source(e, I(C / 4))));
  }
};

/// dx [N, H, W, C] <- sum over a < sh, b < sw of dy [N, H*sh, W*sw, C] at (i*sh + a, j*sw + b).
struct UpsampleBackward {
  const float* dy;
  float* dx;
  int H, W, C, sh, sw;
  /// Index in dy of the top-left element of dx element e's block and the row
  /// pitch of dy, in units of C / cu channels (as UpsampleForward::source).
  template <class I>
  __device__ size_t block_origin(I e, I cu, size_t& pitch) const {
    const I ch = e % cu, pix = e / cu, j = pix % I(W), row = pix / I(W);  // row = n * H + i
    pitch = size_t(W) * sw * cu;
    return size_t(row) * sh * pitch + size_t(j) * sw * cu + ch;
  }
  template <class I>
  __device__ void one(I e) const {
    size_t pitch;
    const size_t o = block_origin(e, I(C), pitch);
    float s = 0.f;
    for (int a = 0; a < sh; ++a)
      for (int b = 0; b < sw; ++b) s += dy[o + a * pitch + size_t(b) * C];
    dx[e] = s;
  }
  template <class I>
  __device__ void quad(I e) const {
    size_t pitch;
    const size_t o = block_origin(e, I(C / 4), pitch);
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int a = 0; a < sh; ++a)
      for (int b = 0; b < sw; ++b) {
        const float4 v = load4(dy, o + a * pitch + size_t(b) * (C / 4));
        s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
      }
    store4(dx, e, s);
  }
};

}  // namespace

void upsample_nearest_forward(const Device& d, const float* x, Shape xs, UpSample2DParams p, float* y) {
  const size_t n = xs.numel() * size_t(p.sh) * size_t(p.sw);
  if (n == 0) return;
  CudaContext& ctx = context(d);
  const bool vec = xs.c % 4 == 0 && aligned16(x, y);
  launch_elementwise(ctx.stream(), UpsampleForward{x, y, xs.h, xs.w, xs.c, p.sh, p.sw}, n, vec);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "upsample_nearest_forward");
}

void upsample_nearest_backward(const Device& d, const float* dy, Shape xs, UpSample2DParams p, float* dx) {
  const size_t n = xs.numel();
  if (n == 0) return;
  CudaContext& ctx = context(d);
  const bool vec = xs.c % 4 == 0 && aligned16(dy, dx);
  launch_elementwise(ctx.stream(), UpsampleBackward{dy, dx, xs.h, xs.w, xs.c, p.sh, p.sw}, n, vec);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "upsample_nearest_backward");
}

}  // namespace trainer::cuda
