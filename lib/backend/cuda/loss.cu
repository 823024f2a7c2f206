// The segmentation loss's per-sample sums and gradient on a GPU, on the
// tower's compute stream, per element through backend/train_math.h.
//
// segmentation_sums is deterministic: each sample's m values are cut into
// `parts` fixed ranges (a function of n and m only), a block per (range,
// sample) adds its values in double and a fixed shared-memory tree, and
// sum_partials adds the ranges in a fixed order; the partials and the sums
// live in the context's workspace. The call returns after the sums reach the
// host (it synchronises the compute stream), or, while the tower defers its
// read-backs, once their copy is queued: the copy reads the workspace before
// any later op on the compute stream can reuse it.
//
// dice_loss_grad forms each sample's coefficients on the device from those
// sums (dice_coefficients), so the host reads the sums late, if at all.
//
// segmentation_loss_grad passes the per-sample coefficients by value in the
// kernel's argument (kGradSamples samples per launch, more launches for more
// samples), so it neither copies nor waits, and the host array may be reused
// as soon as the call returns.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/partial_sums.h"
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cuda {

namespace {

/// Sums per sample (bce, p*y, p, y).
constexpr int kSums = 4;
/// Values per range below which segmentation_sums uses fewer ranges (8 per thread).
constexpr size_t kValuesPerPart = 8 * kThreads;
/// Blocks segmentation_sums aims at (ranges x samples).
constexpr size_t kSumBlocks = 2048;
/// Samples whose coefficients one gradient launch carries.
constexpr int kGradSamples = 64;

/// Block (b, s): partials[(s * 4 + q) * parts + b] <- sum q of the values
/// [m b / parts, m (b + 1) / parts) of sample s (q: bce, p*y, p, y; blockDim.x == kThreads).
__global__ void segmentation_partials_kernel(const float* z, const float* y, int n, size_t m, bool need_bce,
                                             bool need_dice, int parts, double* partials) {
  __shared__ double sh[kSums][kThreads];
  const unsigned t = threadIdx.x;
  const int b = int(blockIdx.x);
  for (int s = int(blockIdx.y); s < n; s += int(gridDim.y)) {
    const float* zs = z + size_t(s) * m;
    const float* ys = y + size_t(s) * m;
    double bce = 0, spy = 0, sp = 0, sy = 0;
    const size_t end = m * size_t(b + 1) / size_t(parts);
    for (size_t i = m * size_t(b) / size_t(parts) + t; i < end; i += kThreads) {
      add_loss_terms(zs[i], ys[i], need_bce, need_dice, bce, spy, sp, sy);
    }
    sh[0][t] = bce, sh[1][t] = spy, sh[2][t] = sp, sh[3][t] = sy;
    __syncthreads();
    for (unsigned w = kThreads / 2; w > 0; w /= 2) {
      if (t < w)
        for (int q = 0; q < kSums; ++q) sh[q][t] += sh[q][t + w];
      __syncthreads();
    }
    if (t < kSums) partials[(size_t(s) * kSums + t) * size_t(parts) + b] = sh[t][0];
    __syncthreads();  // sh is rewritten for the next sample
  }
}

/// The coefficients of up to kGradSamples samples, by value.
struct GradCoefficients {
  float c[3 * kGradSamples];
};

/// g[s, i] <- segmentation_grad(z[s, i], y[s, i], coef[s]) for the samples
/// s = blockIdx.y of this launch (z, y, g point at its first sample).
__global__ void segmentation_grad_kernel(const float* z, const float* y, size_t m, GradCoefficients coef,
                                         float* g) {
  const int s = int(blockIdx.y);
  const float c0 = coef.c[3 * s], c1 = coef.c[3 * s + 1], c2 = coef.c[3 * s + 2];
  const size_t off = size_t(s) * m;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < m; i += size_t(gridDim.x) * blockDim.x)
    g[off + i] = segmentation_grad(z[off + i], y[off + i], c0, c1, c2);
}

/// g[s, i] <- segmentation_grad(z[s, i], y[s, i], dice_coefficients(sums of s, m, with_bce)) for every
/// sample s (blockIdx.y and on); each thread forms its sample's coefficients from the device sums [n, 4].
__global__ void dice_grad_kernel(const float* z, const float* y, int n, size_t m, bool with_bce,
                                 const double* sums, float* g) {
  for (int s = int(blockIdx.y); s < n; s += int(gridDim.y)) {
    float c[3];
    dice_coefficients(sums + size_t(s) * kSums, m, with_bce, c);
    const size_t off = size_t(s) * m;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < m; i += size_t(gridDim.x) * blockDim.x)
      g[off + i] = segmentation_grad(z[off + i], y[off + i], c[0], c[1], c[2]);
  }
}

/// Queues segmentation_sums's sums (n > 0, m > 0) into ctx's workspace; returns the device array [n, 4].
const double* queue_segmentation_sums(CudaContext& ctx, const float* z, const float* y, int n, size_t m,
                                      bool need_bce, bool need_dice) {
  const size_t max_parts = std::max<size_t>(1, kSumBlocks / size_t(n));
  const int parts = int(std::clamp<size_t>((m + kValuesPerPart - 1) / kValuesPerPart, 1, max_parts));
  const int rows = n * kSums;
  double* partials =
      static_cast<double*>(ctx.workspace((size_t(rows) * size_t(parts) + size_t(rows)) * sizeof(double)));
  double* sums = partials + size_t(rows) * size_t(parts);
  const dim3 grid(unsigned(parts), unsigned(std::min(n, 65535)));  // gridDim.y limit; more samples loop
  segmentation_partials_kernel<<<grid, kThreads, 0, ctx.stream()>>>(z, y, n, m, need_bce, need_dice, parts,
                                                                    partials);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "segmentation_sums");
  sum_partials(ctx, partials, rows, parts, sums);
  return sums;
}

/// sums_host [n, 4] <- the device sums, at once or when the deferred read-backs are finished.
void read_sums(CudaContext& ctx, const double* sums, int n, double* sums_host) {
  const size_t bytes = size_t(n) * kSums * sizeof(double);
  ctx.read_back_then(sums, bytes, [sums_host, bytes](const void* host) { std::memcpy(sums_host, host, bytes); });
}

}  // namespace

void segmentation_sums(const Device& d, const float* z, const float* y, int n, size_t m, bool need_bce,
                       bool need_dice, double* sums_host) {
  if (n <= 0) return;
  if (m == 0 || (!need_bce && !need_dice)) {
    std::fill(sums_host, sums_host + size_t(n) * kSums, 0.0);
    return;
  }
  CudaContext& ctx = context(d);
  read_sums(ctx, queue_segmentation_sums(ctx, z, y, n, m, need_bce, need_dice), n, sums_host);
}

void dice_loss_grad(const Device& d, const float* z, const float* y, int n, size_t m, bool with_bce,
                    double* sums_host, float* g) {
  if (n <= 0) return;
  if (m == 0) {
    std::fill(sums_host, sums_host + size_t(n) * kSums, 0.0);
    return;
  }
  CudaContext& ctx = context(d);
  const double* sums = queue_segmentation_sums(ctx, z, y, n, m, with_bce, true);
  const unsigned gx = std::max(1u, std::min(grid_blocks(m), unsigned(kMaxBlocks / size_t(std::min(n, 65535)))));
  dice_grad_kernel<<<dim3(gx, unsigned(std::min(n, 65535))), kThreads, 0, ctx.stream()>>>(z, y, n, m, with_bce,
                                                                                          sums, g);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "dice_loss_grad");
  read_sums(ctx, sums, n, sums_host);
}

void segmentation_loss_grad(const Device& d, const float* z, const float* y, int n, size_t m,
                            const float* coef_host, float* g) {
  if (n <= 0 || m == 0) return;
  CudaContext& ctx = context(d);
  for (int first = 0; first < n; first += kGradSamples) {
    const int count = std::min(kGradSamples, n - first);
    GradCoefficients coef{};
    std::copy(coef_host + size_t(3) * first, coef_host + size_t(3) * (first + count), coef.c);
    const unsigned gx = std::max(1u, std::min(grid_blocks(m), unsigned(kMaxBlocks / size_t(count))));
    const size_t off = size_t(first) * m;
    segmentation_grad_kernel<<<dim3(gx, unsigned(count)), kThreads, 0, ctx.stream()>>>(z + off, y + off, m, coef,
                                                                                      g + off);
    TRAINER_CUDA_CHECK_LAUNCH(ctx, "segmentation_loss_grad");
  }
}

}  // namespace trainer::cuda
