// The metrics' histograms on a GPU, on the tower's compute stream: each block
// counts its values in a shared-memory histogram (one atomicAdd per group of
// lanes of a warp that fall into the same bin, __match_any_sync), then adds
// it into a device histogram with atomicAdd; the call copies that to the
// host, waits for the compute stream and adds it to hist_host. Integer
// counts: the result does not depend on the order. A bin functor (the logit
// thresholds, or the AUC's bucket count) is passed by value in the kernel's
// argument; the device histogram lives in the context's workspace. While the
// tower defers its read-backs, the copy is queued (it reads the workspace
// before any later op on the compute stream can reuse it) and the counts are
// added at CudaContext::finish_read_backs. Bins through backend/train_math.h,
// as on the CPU.
#include <algorithm>
#include <string>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cuda {

namespace {

constexpr int kT = kLogitThresholds;
/// Most blocks: each adds its counts to the device histogram with atomics.
constexpr unsigned kHistogramBlocks = 512;
constexpr unsigned kWarp = 32;

/// The bin of a logit among the kLogitThresholds ascending logit thresholds.
struct LogitBin {
  float t[kT];
  __device__ int operator()(float z) const { return logit_bin(z, t, kT); }
};

/// The bin of a logit's probability among `bins` AUC buckets.
struct ProbabilityBin {
  int bins;
  __device__ int operator()(float z) const { return probability_bucket(z, bins); }
};

/// hist[fg * class_bins + bin_of(z[i])] += 1 for i < n, fg = y[i] > 0.5, with
/// 2 class_bins unsigned long longs of dynamic shared memory (blockDim.x a
/// multiple of 32: every warp runs the same iterations, lanes past n vote
/// with the out-of-range bin 2 class_bins).
template <class BinOf>
__global__ void histogram_kernel(const float* z, const float* y, size_t n, BinOf bin_of, int class_bins,
                                 unsigned long long* hist) {
  extern __shared__ unsigned long long local[];
  const int bins = 2 * class_bins;
  for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const unsigned lane = threadIdx.x % kWarp;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t base = size_t(blockIdx.x) * blockDim.x + (threadIdx.x - lane); base < n; base += stride) {
    const size_t i = base + lane;
    const int bin = i < n ? (y[i] > 0.5f) * class_bins + bin_of(z[i]) : bins;
    const unsigned same = __match_any_sync(0xffffffffu, bin);
    if (bin < bins && lane == unsigned(__ffs(same) - 1)) atomicAdd(&local[bin], (unsigned long long)__popc(same));
  }
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x)
    if (local[b]) atomicAdd(&hist[b], local[b]);
}

template <class BinOf>
void histogram(const Device& d, const float* z, const float* y, size_t n, BinOf bin_of, int class_bins,
               int64_t* hist_host, const char* name) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  const size_t bins = size_t(2) * size_t(class_bins), bytes = bins * sizeof(unsigned long long);
  auto* hist = static_cast<unsigned long long*>(ctx.workspace(bytes));
  TRAINER_CUDA_CHECK(ctx, cudaMemsetAsync(hist, 0, bytes, ctx.stream()));
  histogram_kernel<<<std::min(grid_blocks(n), kHistogramBlocks), kThreads, bytes, ctx.stream()>>>(z, y, n, bin_of,
                                                                                                 class_bins, hist);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess)
    ctx.fail((std::string(name) + " launch").c_str(), status_string(status));
  ctx.read_back_then(hist, bytes, [hist_host, bins](const void* host) {
    const auto* counts = static_cast<const unsigned long long*>(host);
    for (size_t b = 0; b < bins; ++b) hist_host[b] += int64_t(counts[b]);
  });
}

}  // namespace

void logit_histogram(const Device& d, const float* z, const float* y, size_t n, const float* thr_host,
                     int64_t* hist_host) {
  LogitBin bin;
  std::copy(thr_host, thr_host + kT, bin.t);
  histogram(d, z, y, n, bin, kT + 1, hist_host, "logit_histogram");
}

void probability_histogram(const Device& d, const float* z, const float* y, size_t n, int bins, int64_t* hist_host) {
  histogram(d, z, y, n, ProbabilityBin{bins}, bins, hist_host, "probability_histogram");
}

}  // namespace trainer::cuda
