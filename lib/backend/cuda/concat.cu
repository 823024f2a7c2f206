// Channel concatenation and its inverse on a GPU: one strided-copy kernel per
// input on the tower's compute stream. Each launch copies an input's [P, c]
// block into (or out of) its channel slice of the [P, cy] tensor, one thread
// per element (per float4 when c, cy, the slice's offset and both base
// addresses allow it). bf16 tensors whose counts and offsets are even are
// copied as 4-byte pairs by the same kernel, else 2 bytes at a time. The pointer and channel arrays are read on the host
// while queuing, so they may be reused as soon as a call returns. (A
// cudaMemcpy2DAsync per input would do the same copies; the kernel is chosen
// for its float4 path and the same launch checks as the other ops.)
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// dst[r * dpitch + col] <- src[r * spitch + col] for rows r and columns
/// col < width (elements of T: float, or uint16_t for bf16; for float every
/// count a multiple of 4 for quad()).
template <class T>
struct StridedCopy {
  const T* src;
  T* dst;
  size_t width, spitch, dpitch;
  template <class I>
  __device__ void one(I i) const {
    const I w = I(width), r = i / w, col = i - r * w;
    dst[size_t(r) * dpitch + col] = src[size_t(r) * spitch + col];
  }
  template <class I>
  __device__ void quad(I j) const {
    if constexpr (sizeof(T) == sizeof(float)) {
      const I w = I(width / 4), r = j / w, col = j - r * w;
      store4(dst, size_t(r) * (dpitch / 4) + col, load4(src, size_t(r) * (spitch / 4) + col));
    } else {
      for (int k = 0; k < 4; ++k) one(I(4) * j + I(k));
    }
  }
};

/// Queues the copy of a [P, c] block of elements of type t between src (row
/// pitch spitch elements) and dst (row pitch dpitch).
void copy_block(CudaContext& ctx, DType t, const void* src, size_t spitch, void* dst, size_t dpitch, size_t c,
                long long P) {
  if (t == DType::BF16) {
    const bool pairs = c % 2 == 0 && spitch % 2 == 0 && dpitch % 2 == 0 &&
                       reinterpret_cast<uintptr_t>(src) % 4 == 0 && reinterpret_cast<uintptr_t>(dst) % 4 == 0;
    if (!pairs) {
      launch_elementwise(ctx.stream(),
                         StridedCopy<uint16_t>{static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), c,
                                               spitch, dpitch},
                         size_t(P) * c, false);
      return;
    }
    c /= 2, spitch /= 2, dpitch /= 2;  // two bf16 per float
  }
  const float* s = static_cast<const float*>(src);
  float* d = static_cast<float*>(dst);
  const bool vec = c % 4 == 0 && spitch % 4 == 0 && dpitch % 4 == 0 && aligned16(s, d);
  launch_elementwise(ctx.stream(), StridedCopy<float>{s, d, c, spitch, dpitch}, size_t(P) * c, vec);
}

/// p advanced by `elements` of type t.
template <class P>
P* advance(P* p, size_t elements, DType t) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return static_cast<Byte*>(p) + elements * dtype_size(t);
}

}  // namespace

void concat_channels_forward(const Device& d, DType t, const void* const* xs, const int* cs, size_t k, long long P,
                             void* y, int cy) {
  if (P <= 0) return;
  CudaContext& ctx = context(d);
  size_t off = 0;  // channel offset of input i in y
  for (size_t i = 0; i < k; ++i) {
    const size_t c = size_t(cs[i]);
    if (c > 0) {
      copy_block(ctx, t, xs[i], c, advance(y, off, t), size_t(cy), c, P);
      TRAINER_CUDA_CHECK_LAUNCH(ctx, "concat_channels_forward");
    }
    off += c;
  }
}

void concat_channels_backward(const Device& d, DType t, const void* dy, int cy, long long P, const int* cs, size_t k,
                              void* const* dxs) {
  if (P <= 0) return;
  CudaContext& ctx = context(d);
  size_t off = 0;  // channel offset of input i in dy
  for (size_t i = 0; i < k; ++i) {
    const size_t c = size_t(cs[i]);
    if (c > 0 && dxs[i]) {
      copy_block(ctx, t, advance(dy, off, t), size_t(cy), dxs[i], c, c, P);
      TRAINER_CUDA_CHECK_LAUNCH(ctx, "concat_channels_backward");
    }
    off += c;
  }
}

}  // namespace trainer::cuda
