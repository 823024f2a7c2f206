// Cropping2D's window copy and its inverse on a GPU: one cudaMemcpy3DAsync on
// the tower's compute stream, the samples as its depth, an image row of
// W * C elements as its pitch; backward clears dx with cudaMemsetAsync first.
// A plain byte copy, so fp32 and bf16 alike.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_context.h"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// The copy between the full images [N, H, W, C] (xs) and the window
/// [N, H - top - bottom, W - left - right, C] at (top, left): into the window
/// when to_window, else from it into the full images.
cudaMemcpy3DParms window_copy(DType t, void* full, void* window, Shape xs, Crop2DParams p, bool to_window) {
  const size_t es = dtype_size(t), pixel = es * size_t(xs.c);
  const size_t ho = size_t(xs.h - p.top - p.bottom), wo = size_t(xs.w - p.left - p.right);
  const cudaPitchedPtr image = make_cudaPitchedPtr(full, pixel * size_t(xs.w), pixel * size_t(xs.w), size_t(xs.h));
  const cudaPitchedPtr win = make_cudaPitchedPtr(window, pixel * wo, pixel * wo, ho);
  const cudaPos corner = make_cudaPos(pixel * size_t(p.left), size_t(p.top), 0);
  cudaMemcpy3DParms m = {};
  if (to_window) {
    m.srcPtr = image, m.srcPos = corner, m.dstPtr = win;
  } else {
    m.srcPtr = win, m.dstPtr = image, m.dstPos = corner;
  }
  m.extent = make_cudaExtent(pixel * wo, ho, size_t(xs.n));
  m.kind = cudaMemcpyDeviceToDevice;
  return m;
}

}  // namespace

void crop_forward(const Device& d, DType t, const void* x, Shape xs, Crop2DParams p, void* y) {
  if (xs.n <= 0) return;
  CudaContext& ctx = context(d);
  const cudaMemcpy3DParms m = window_copy(t, const_cast<void*>(x), y, xs, p, true);
  TRAINER_CUDA_CHECK(ctx, cudaMemcpy3DAsync(&m, ctx.stream()));
}

void crop_backward(const Device& d, DType t, const void* dy, Shape xs, Crop2DParams p, void* dx) {
  if (xs.n <= 0) return;
  CudaContext& ctx = context(d);
  TRAINER_CUDA_CHECK(ctx, cudaMemsetAsync(dx, 0, size_t(xs.numel()) * dtype_size(t), ctx.stream()));
  const cudaMemcpy3DParms m = window_copy(t, dx, const_cast<void*>(dy), xs, p, false);
  TRAINER_CUDA_CHECK(ctx, cudaMemcpy3DAsync(&m, ctx.stream()));
}

}  // namespace trainer::cuda
