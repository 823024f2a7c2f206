// augment_batch on a GPU: one thread per output pixel (the batch's pixels
// along x, grid-stride; samples along y), on the tower's compute stream, per
// pixel through backend/augment_math.h, the same functions as the CPU's
// (backend/cpu/augment_batch.cpp).
#include <algorithm>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

template <class T, class M>
__global__ void augment_batch_kernel(AugmentBatch b) {
  const size_t plane = size_t(b.h) * size_t(b.w);
  const size_t start = size_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  for (int k = blockIdx.y; k < b.n; k += gridDim.y) {
    const SampleWarp s = b.warps[k];
    const T* image = static_cast<const T*>(b.images) + size_t(k) * plane * size_t(b.c);
    const M* mask = b.masks ? static_cast<const M*>(b.masks) + size_t(k) * plane : nullptr;
    for (size_t p = start; p < plane; p += stride) {
      const int y = int(p / size_t(b.w)), x = int(p % size_t(b.w));
      int sx, sy;
      warp_source(s, x, y, sx, sy);
      float* out = b.image_out + (size_t(k) * plane + p) * size_t(b.c);
      for (int ch = 0; ch < b.c; ++ch)
        out[ch] = model_value(bilinear_value(image, b.h, b.w, b.c, ch, sx, sy, b.fill, b.cval), s);
      if (mask) b.mask_out[size_t(k) * plane + p] = nearest_mask_value(mask, b.h, b.w, s, x, y, b.fill);
    }
  }
}

template <class T, class M>
void launch(CudaContext& ctx, const AugmentBatch& b) {
  const unsigned gy = unsigned(std::min(b.n, 65535));  // gridDim.y limit; more samples loop
  const unsigned gx = std::max(1u, std::min(grid_blocks(size_t(b.h) * size_t(b.w)), unsigned(kMaxBlocks / gy)));
  augment_batch_kernel<T, M><<<dim3(gx, gy), kThreads, 0, ctx.stream()>>>(b);
}

template <class T>
void launch_with_masks(CudaContext& ctx, const AugmentBatch& b) {
  if (b.masks && b.mask_bytes == 2) return launch<T, uint16_t>(ctx, b);
  launch<T, uint8_t>(ctx, b);
}

}  // namespace

void augment_batch(const Device& d, const AugmentBatch& b) {
  require_held_bytes(b);
  if (b.n == 0 || b.h == 0 || b.w == 0) return;
  CudaContext& ctx = context(d);
  if (b.pixel_bytes == 2) launch_with_masks<uint16_t>(ctx, b);
  else launch_with_masks<uint8_t>(ctx, b);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "augment_batch");
}

}  // namespace trainer::cuda
