// Dropout forward / backward on a GPU, on the tower's compute stream. The mask
// is the CPU's (backend/cpu/dropout.cpp) bit for bit: element e of sample n
// (e counted within the sample) is kept when
// dropout_keep(dropout_draw(dropout_sample_key(step_key, sample_offset + n), k), threshold),
// k = e (k = e % C, its channel, for SpatialDropout2D),
// all through backend/elementwise_math.h. The forward grid is 2-D (samples
// along y) so that each thread derives its sample's key once.
#include <algorithm>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// x, y, mask: N samples of `per` elements; element e draws with index
/// e % channels (e when channels is 0); see dropout_forward.
__global__ void dropout_forward_kernel(const float* x, float* y, uint8_t* mask, int N, size_t per, size_t channels,
                                       uint64_t step_key, long long sample_offset, uint32_t threshold,
                                       float scale) {
  const size_t start = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (int n = blockIdx.y; n < N; n += gridDim.y) {
    const uint64_t key = dropout_sample_key(step_key, uint64_t(sample_offset + n));
    const size_t off = size_t(n) * per;
    for (size_t e = start; e < per; e += stride) {
      const bool keep = dropout_keep(dropout_draw(key, channels ? e % channels : e), threshold);
      mask[off + e] = uint8_t(keep);
      y[off + e] = dropout_apply(keep, x[off + e], scale);
    }
  }
}

/// dx[i] <- dropout_apply(mask[i] != 0, dy[i], scale); quad() also reads the mask as uchar4.
struct DropoutBackward {
  const float* dy;
  const uint8_t* mask;
  float scale;
  float* dx;
  template <class I>
  __device__ void one(I i) const {
    dx[i] = dropout_apply(mask[i] != 0, dy[i], scale);
  }
  template <class I>
  __device__ void quad(I j) const {
    const uchar4 m = reinterpret_cast<const uchar4*>(mask)[j];
    float4 g = load4(dy, j);
    g.x = dropout_apply(m.x != 0, g.x, scale);
    g.y = dropout_apply(m.y != 0, g.y, scale);
    g.z = dropout_apply(m.z != 0, g.z, scale);
    g.w = dropout_apply(m.w != 0, g.w, scale);
    store4(dx, j, g);
  }
};

}  // namespace

void dropout_forward(const Device& d, const float* x, Shape s, uint64_t step_key, long long sample_offset,
                     DropoutParams p, float* y, uint8_t* mask) {
  const size_t per = s.sample_numel();
  if (s.n <= 0 || per == 0) return;
  CudaContext& ctx = context(d);
  const unsigned gy = unsigned(std::min(s.n, 65535));  // gridDim.y limit; more samples loop
  const unsigned gx = std::max(1u, std::min(grid_blocks(per), unsigned(kMaxBlocks / gy)));
  const size_t channels = p.per_channel ? size_t(s.c) : 0;  // the draw index: e % channels, or e
  dropout_forward_kernel<<<dim3(gx, gy), kThreads, 0, ctx.stream()>>>(x, y, mask, s.n, per, channels, step_key,
                                                                      sample_offset, p.threshold, p.scale);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "dropout_forward");
}

void dropout_backward(const Device& d, const float* dy, const uint8_t* mask, float scale, float* dx, size_t n) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  const bool vec = aligned16(dy, dx) && reinterpret_cast<uintptr_t>(mask) % 4 == 0;
  launch_elementwise(ctx.stream(), DropoutBackward{dy, mask, scale, dx}, n, vec);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "dropout_backward");
}

}  // namespace trainer::cuda
