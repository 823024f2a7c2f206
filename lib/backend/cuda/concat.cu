// Channel concatenation and its inverse on a GPU: one strided-copy kernel per
// input on the tower's compute stream. Each launch copies an input's [P, c]
// block into (or out of) its channel slice of the [P, cy] tensor, one thread
// per element (per float4 when c, cy, the slice's offset and both base
// addresses allow it). The pointer and channel arrays are read on the host
// while queuing, so they may be reused as soon as a call returns. (A
// cudaMemcpy2DAsync per input would do the same copies; the kernel is chosen
// for its float4 path and the same launch checks as the other ops.)
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// dst[r * dpitch + col] <- src[r * spitch + col] for rows r and columns
/// col < width (floats; every count a multiple of 4 for quad()).
struct StridedCopy {
  const float* src;
  float* dst;
  size_t width, spitch, dpitch;
  template <class I>
  __device__ void one(I i) const {
    const I w = I(width), r = i / w, col = i - r * w;
    dst[size_t(r) * dpitch + col] = src[size_t(r) * spitch + col];
  }
  template <class I>
  __device__ void quad(I j) const {
    const I w = I(width / 4), r = j / w, col = j - r * w;
    store4(dst, size_t(r) * (dpitch / 4) + col, load4(src, size_t(r) * (spitch / 4) + col));
  }
};

/// Queues the copy of a [P, c] block between src (row pitch spitch) and dst (row pitch dpitch).
void copy_block(CudaContext& ctx, const float* src, size_t spitch, float* dst, size_t dpitch, size_t c,
                long long P) {
  const bool vec = c % 4 == 0 && spitch % 4 == 0 && dpitch % 4 == 0 && aligned16(src, dst);
  launch_elementwise(ctx.stream(), StridedCopy{src, dst, c, spitch, dpitch}, size_t(P) * c, vec);
}

}  // namespace

void concat_channels_forward(const Device& d, const float* const* xs, const int* cs, size_t k, long long P,
                             float* y, int cy) {
  if (P <= 0) return;
  CudaContext& ctx = context(d);
  size_t off = 0;  // channel offset of input t in y
  for (size_t t = 0; t < k; ++t) {
    const size_t c = size_t(cs[t]);
    if (c > 0) {
      copy_block(ctx, xs[t], c, y + off, size_t(cy), c, P);
      TRAINER_CUDA_CHECK_LAUNCH(ctx, "concat_channels_forward");
    }
    off += c;
  }
}

void concat_channels_backward(const Device& d, const float* dy, int cy, long long P, const int* cs, size_t k,
                              float* const* dxs) {
  if (P <= 0) return;
  CudaContext& ctx = context(d);
  size_t off = 0;  // channel offset of input t in dy
  for (size_t t = 0; t < k; ++t) {
    const size_t c = size_t(cs[t]);
    if (c > 0 && dxs[t]) {
      copy_block(ctx, dy + off, size_t(cy), dxs[t], c, c, P);
      TRAINER_CUDA_CHECK_LAUNCH(ctx, "concat_channels_backward");
    }
    off += c;
  }
}

}  // namespace trainer::cuda
