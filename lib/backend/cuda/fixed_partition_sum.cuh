#pragma once
// A deterministic sum of n per-item terms on a GPU (the losses' sums): the n
// items are cut into `parts` fixed ranges (a function of n only), a block per
// range adds its terms in double and a fixed shared-memory tree, and
// sum_partials adds the ranges in a fixed order, so the result is the same on
// every run and GPU. The partials live in the context's workspace; the call
// returns after the sum reaches the host (it synchronises the compute
// stream), or, while the context defers its read-backs, once its copy is
// queued (which reads the workspace before any later op can reuse it).
#include <algorithm>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/partial_sums.h"

namespace trainer::cuda {

/// Items per range below which fixed_partition_sum uses fewer ranges (8 per thread).
constexpr size_t kItemsPerPart = 8 * kThreads;
/// Most ranges of fixed_partition_sum.
constexpr size_t kMaxSumParts = 2048;

/// Block b: partials[b] <- the sum of term(i) over i in [n b / parts, n (b + 1) / parts)
/// (blockDim.x == kThreads).
template <class Term>
__global__ void fixed_partition_partials_kernel(Term term, size_t n, int parts, double* partials) {
  __shared__ double sh[kThreads];
  const unsigned t = threadIdx.x;
  const size_t b = blockIdx.x, end = n * (b + 1) / size_t(parts);
  double s = 0;
  for (size_t i = n * b / size_t(parts) + t; i < end; i += kThreads) s += term(i);
  sh[t] = s;
  __syncthreads();
  for (unsigned w = kThreads / 2; w > 0; w /= 2) {
    if (t < w) sh[t] += sh[t + w];
    __syncthreads();
  }
  if (t == 0) partials[b] = sh[0];
}

/// *sum_host (host) <- the sum over i < n of term(i) (a __device__ functor
/// returning a float or double), at once or, while ctx defers its
/// read-backs, when they are finished; `what` names the kernel in a launch error.
template <class Term>
void fixed_partition_sum(CudaContext& ctx, Term term, size_t n, double* sum_host, const char* what) {
  if (n == 0) {
    *sum_host = 0.0;
    return;
  }
  const int parts = int(std::clamp<size_t>((n + kItemsPerPart - 1) / kItemsPerPart, 1, kMaxSumParts));
  double* partials = static_cast<double*>(ctx.workspace((size_t(parts) + 1) * sizeof(double)));
  double* sum = partials + parts;
  fixed_partition_partials_kernel<<<unsigned(parts), kThreads, 0, ctx.stream()>>>(term, n, parts, partials);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) ctx.fail(what, status_string(e));
  sum_partials(ctx, partials, 1, parts, sum);
  ctx.read_back_then(sum, sizeof(double), [sum_host](const void* host) {
    *sum_host = *static_cast<const double*>(host);
  });
}

}  // namespace trainer::cuda
