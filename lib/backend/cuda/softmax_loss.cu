// The categorical (softmax) cross-entropy's sum and gradient (plain, smoothed
// or focal), the confusion counts of its metrics and the channel softmax on a
// GPU, on the tower's compute stream, per pixel through backend/train_math.h
// (one thread per pixel and its k contiguous logits).
//
// softmax_loss_sum is deterministic (fixed_partition_sum.cuh).
// class_confusion counts in a per-block shared-memory table when the k x k
// counts fit (k <= kSharedClasses), else straight into the device table;
// integer counts, so the order does not matter. Both work in the context's
// workspace and return after the result reaches the host (they synchronise
// the compute stream), or, while the tower defers its read-backs, once its
// copy is queued (which reads the workspace before any later op can reuse it).
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/fixed_partition_sum.cuh"
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cuda {

namespace {

/// Most blocks of class_confusion: each adds its table to the device's with atomics.
constexpr unsigned kConfusionBlocks = 512;
/// Largest k whose k x k 64-bit counts (32 KiB) a block keeps in shared memory.
constexpr int kSharedClasses = 64;

/// One pixel's softmax_loss_term (fixed_partition_sum's term).
struct SoftmaxLossTerm {
  const float* z;
  const float* y;
  int k;
  CrossEntropyForm f;
  __device__ float operator()(size_t i) const {
    return softmax_loss_term(z + i * size_t(k), k, class_index(y[i], k), f);
  }
};

__global__ void softmax_loss_grad_kernel(const float* z, const float* y, size_t n, int k, CrossEntropyForm f,
                                         float scale, float* g) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    softmax_loss_term_grad(z + i * size_t(k), k, class_index(y[i], k), f, scale, g + i * size_t(k));
}

/// table[t * k + p] += 1 per pixel (see class_confusion); with shared, each block
/// counts in dynamic shared memory first (k * k counts) and adds its table once.
__global__ void class_confusion_kernel(const float* z, const float* y, size_t n, int k, bool shared,
                                       unsigned long long* table) {
  extern __shared__ unsigned long long local[];
  const unsigned bins = unsigned(k) * unsigned(k);
  unsigned long long* counts = shared ? local : table;
  if (shared) {
    for (unsigned b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    __syncthreads();
  }
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int t = class_index(y[i], k);
    if (t >= 0) atomicAdd(&counts[unsigned(t) * unsigned(k) + unsigned(argmax_class(z + i * size_t(k), k))], 1ull);
  }
  if (shared) {
    __syncthreads();
    for (unsigned b = threadIdx.x; b < bins; b += blockDim.x)
      if (local[b]) atomicAdd(&table[b], local[b]);
  }
}

__global__ void softmax_channels_kernel(float* x, size_t n, int k) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    softmax_in_place(x + i * size_t(k), k);
}

}  // namespace

void softmax_loss_sum(const Device& d, const float* z, const float* y, size_t n, int k, CrossEntropyForm f,
                      double* sum_host) {
  fixed_partition_sum(context(d), SoftmaxLossTerm{z, y, k, f}, n, sum_host, "softmax_loss_sum launch");
}

void softmax_loss_grad(const Device& d, const float* z, const float* y, size_t n, int k, CrossEntropyForm f,
                       float scale, float* g) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  softmax_loss_grad_kernel<<<grid_blocks(n), kThreads, 0, ctx.stream()>>>(z, y, n, k, f, scale, g);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "softmax_loss_grad");
}

void class_confusion(const Device& d, const float* z, const float* y, size_t n, int k, int64_t* confusion_host) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  const size_t bins = size_t(k) * size_t(k);
  auto* table = static_cast<unsigned long long*>(ctx.workspace(bins * sizeof(unsigned long long)));
  TRAINER_CUDA_CHECK(ctx, cudaMemsetAsync(table, 0, bins * sizeof(unsigned long long), ctx.stream()));
  const bool shared = k <= kSharedClasses;
  class_confusion_kernel<<<std::min(grid_blocks(n), kConfusionBlocks), kThreads,
                           shared ? bins * sizeof(unsigned long long) : 0, ctx.stream()>>>(z, y, n, k, shared, table);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "class_confusion");
  ctx.read_back_then(table, bins * sizeof(unsigned long long), [confusion_host, bins](const void* host) {
    const auto* counts = static_cast<const unsigned long long*>(host);
    for (size_t b = 0; b < bins; ++b) confusion_host[b] += int64_t(counts[b]);
  });
}

void softmax_channels(const Device& d, float* x, size_t n, int k) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  softmax_channels_kernel<<<grid_blocks(n), kThreads, 0, ctx.stream()>>>(x, n, k);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "softmax_channels");
}

}  // namespace trainer::cuda
