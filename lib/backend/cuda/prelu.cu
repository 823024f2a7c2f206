// PReLU forward / backward on a GPU, on the tower's compute stream, through
// backend/elementwise_math.h. The slope gradient is deterministic: a block per
// slope adds its uses in a fixed partition (thread t takes uses t, t + 256,
// ...) and a fixed shared-memory tree, in double. The CPU adds the uses in
// order, so the two agree to rounding, not bit for bit.
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// Element e of x [N, H, W, C] (grid-stride): y or dx.
__global__ void prelu_kernel(const float* x, Shape xs, const float* alpha, PReLUShape a, const float* dy, float* out,
                             size_t total) {
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const NhwcIndex i = nhwc_index(e, xs.h, xs.w, xs.c);
    const float s = alpha[prelu_alpha_index(i.h, i.w, i.c, a)];
    out[e] = dy ? prelu_dx(x[e], s, dy[e]) : prelu_value(x[e], s);
  }
}

/// Block b (grid-stride over slopes): dalpha[b] <- the sum of its uses' terms.
__global__ void prelu_dalpha_kernel(const float* x, Shape xs, PReLUShape a, const float* dy, size_t uses,
                                    size_t slopes, float* dalpha) {
  __shared__ double sh[kThreads];
  for (size_t s = blockIdx.x; s < slopes; s += gridDim.x) {
    const int k = int(s % size_t(a.ac)), j = int(s / size_t(a.ac) % size_t(a.aw)),
              i = int(s / size_t(a.ac) / size_t(a.aw));
    double sum = 0;
    for (size_t m = threadIdx.x; m < uses; m += kThreads) {
      const size_t e = prelu_use_offset(m, i, j, k, a, xs);
      sum += prelu_dalpha_term(x[e], dy[e]);
    }
    sh[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) sh[threadIdx.x] += sh[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) dalpha[s] = float(sh[0]);
    __syncthreads();  // sh is rewritten for the next slope
  }
}

}  // namespace

void prelu_forward(const Device& d, const float* x, Shape xs, const float* alpha, PReLUShape a, float* y) {
  const size_t total = xs.numel();
  if (total == 0) return;
  CudaContext& ctx = context(d);
  prelu_kernel<<<grid_blocks(total), kThreads, 0, ctx.stream()>>>(x, xs, alpha, a, nullptr, y, total);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "prelu_forward");
}

void prelu_backward(const Device& d, const float* x, Shape xs, const float* alpha, PReLUShape a, const float* dy,
                    float* dx, float* dalpha) {
  CudaContext& ctx = context(d);
  const size_t total = xs.numel(), slopes = size_t(a.ah) * size_t(a.aw) * size_t(a.ac);
  if (total == 0) {
    if (dalpha) ctx.zero(dalpha, slopes * sizeof(float));
    return;
  }
  if (dx) {
    prelu_kernel<<<grid_blocks(total), kThreads, 0, ctx.stream()>>>(x, xs, alpha, a, dy, dx, total);
    TRAINER_CUDA_CHECK_LAUNCH(ctx, "prelu_backward");
  }
  if (!dalpha) return;  // a frozen layer
  const unsigned blocks = unsigned(std::min(slopes, kMaxBlocks));
  prelu_dalpha_kernel<<<blocks, kThreads, 0, ctx.stream()>>>(x, xs, a, dy, total / slopes, slopes, dalpha);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "prelu_backward (slopes)");
}

}  // namespace trainer::cuda
