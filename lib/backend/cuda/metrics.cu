// The metrics' logit histogram on a GPU, on the tower's compute stream: each
// block counts its values in a shared-memory histogram (one atomicAdd per
// group of lanes of a warp that fall into the same bin, __match_any_sync),
// then adds it into a 22-bin device histogram with atomicAdd; the call copies
// that to the host, waits for the compute stream and adds it to hist_host.
// Integer counts: the result does not depend on the order. The thresholds are
// passed by value in the kernel's argument; the device histogram lives in the
// context's workspace for the duration of the call. Bins through
// backend/train_math.h (logit_bin), as on the CPU.
#include <algorithm>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cuda {

namespace {

constexpr int kT = kLogitThresholds;
/// Bins per class (0 .. kT thresholds exceeded) and in all ([background | foreground]).
constexpr int kClassBins = kT + 1, kBins = 2 * kClassBins;
/// Most blocks: each adds its kBins counts to the device histogram with atomics.
constexpr unsigned kHistogramBlocks = 512;
constexpr unsigned kWarp = 32;

/// The kLogitThresholds ascending logit thresholds, by value in the kernel's argument.
struct Thresholds {
  float t[kT];
};

/// hist[fg * kClassBins + logit_bin(z[i])] += 1 for i < n, fg = y[i] > 0.5
/// (blockDim.x a multiple of 32: every warp runs the same iterations, lanes
/// past n vote with the out-of-range bin kBins).
__global__ void logit_histogram_kernel(const float* z, const float* y, size_t n, Thresholds th,
                                       unsigned long long* hist) {
  __shared__ unsigned long long local[kBins];
  for (unsigned b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  float thr[kT];
  for (int t = 0; t < kT; ++t) thr[t] = th.t[t];
  const unsigned lane = threadIdx.x % kWarp;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t base = size_t(blockIdx.x) * blockDim.x + (threadIdx.x - lane); base < n; base += stride) {
    const size_t i = base + lane;
    const int bin = i < n ? (y[i] > 0.5f) * kClassBins + logit_bin(z[i], thr, kT) : kBins;
    const unsigned same = __match_any_sync(0xffffffffu, bin);
    if (bin < kBins && lane == unsigned(__ffs(same) - 1)) atomicAdd(&local[bin], (unsigned long long)__popc(same));
  }
  __syncthreads();
  for (unsigned b = threadIdx.x; b < kBins; b += blockDim.x)
    if (local[b]) atomicAdd(&hist[b], local[b]);
}

}  // namespace

void logit_histogram(const Device& d, const float* z, const float* y, size_t n, const float* thr_host,
                     int64_t* hist_host) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  Thresholds th;
  std::copy(thr_host, thr_host + kT, th.t);
  auto* hist = static_cast<unsigned long long*>(ctx.workspace(kBins * sizeof(unsigned long long)));
  TRAINER_CUDA_CHECK(ctx, cudaMemsetAsync(hist, 0, kBins * sizeof(unsigned long long), ctx.stream()));
  logit_histogram_kernel<<<std::min(grid_blocks(n), kHistogramBlocks), kThreads, 0, ctx.stream()>>>(z, y, n, th,
                                                                                                   hist);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "logit_histogram");
  unsigned long long counts[kBins];
  ctx.read_back(counts, hist, sizeof(counts));
  for (int b = 0; b < kBins; ++b) hist_host[b] += int64_t(counts[b]);
}

}  // namespace trainer::cuda
