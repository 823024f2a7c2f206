// Weight regularizers on a GPU, on the tower's compute stream, per element
// through backend/train_math.h.
//
// abs_and_square_sums is deterministic: each weight's n values are cut into
// `parts` fixed ranges (a function of n only), a block per range adds |w| and
// w^2 in double and a fixed shared-memory tree, and sum_partials adds each
// weight's ranges in a fixed order (rows of the widest weight's parts, the
// unused entries zero); the partials and sums live in the context's workspace.
// abs_and_square_sums returns after the sums reach the host (one
// synchronisation of the compute stream for all the weights);
// queue_abs_and_square_sums leaves them on the device (gradient clipping).
#include <algorithm>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/partial_sums.h"
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cuda {

namespace {

/// Weights per range below which abs_and_square_sums uses fewer ranges (8 per thread).
constexpr size_t kWeightsPerPart = 8 * kThreads;
/// Most ranges of abs_and_square_sums.
constexpr size_t kMaxParts = 1024;

/// Block b: partials[b] <- sum |w|, partials[stride + b] <- sum w^2 over the
/// weights [n b / parts, n (b + 1) / parts) (blockDim.x == kThreads).
__global__ void abs_square_partials_kernel(const float* w, size_t n, int parts, int stride, double* partials) {
  __shared__ double sh[2][kThreads];
  const unsigned t = threadIdx.x;
  const int b = int(blockIdx.x);
  double a = 0, q = 0;
  const size_t end = n * size_t(b + 1) / size_t(parts);
  for (size_t i = n * size_t(b) / size_t(parts) + t; i < end; i += kThreads) {
    const double x = w[i];
    a += fabs(x);
    q += x * x;
  }
  sh[0][t] = a, sh[1][t] = q;
  __syncthreads();
  for (unsigned k = kThreads / 2; k > 0; k /= 2) {
    if (t < k) sh[0][t] += sh[0][t + k], sh[1][t] += sh[1][t + k];
    __syncthreads();
  }
  if (t < 2) partials[size_t(t) * size_t(stride) + b] = sh[t][0];
}

/// regularized_grad on every element.
struct RegularizerGrad {
  const float* w;
  float* g;
  float l1, l2;
  template <class I>
  __device__ void one(I i) const {
    g[i] = regularized_grad(g[i], w[i], l1, l2);
  }
  template <class I>
  __device__ void quad(I j) const {
    const float4 x = load4(w, j);
    float4 d = load4(g, j);
    d.x = regularized_grad(d.x, x.x, l1, l2), d.y = regularized_grad(d.y, x.y, l1, l2);
    d.z = regularized_grad(d.z, x.z, l1, l2), d.w = regularized_grad(d.w, x.w, l1, l2);
    store4(g, j, d);
  }
};

/// The ranges abs_and_square_sums cuts n weights into.
int parts_of(size_t n) { return int(std::clamp<size_t>((n + kWeightsPerPart - 1) / kWeightsPerPart, 1, kMaxParts)); }

}  // namespace

const double* queue_abs_and_square_sums(CudaContext& ctx, const float* const* ws, const size_t* ns, size_t k) {
  int stride = 1;
  for (size_t j = 0; j < k; ++j) stride = std::max(stride, parts_of(ns[j]));
  const size_t rows = 2 * k, partial_count = rows * size_t(stride);
  double* partials = static_cast<double*>(ctx.workspace((partial_count + rows) * sizeof(double)));
  double* sums = partials + partial_count;
  TRAINER_CUDA_CHECK(ctx, cudaMemsetAsync(partials, 0, partial_count * sizeof(double), ctx.stream()));
  for (size_t j = 0; j < k; ++j) {
    if (ns[j] == 0) continue;
    const int parts = parts_of(ns[j]);
    abs_square_partials_kernel<<<unsigned(parts), kThreads, 0, ctx.stream()>>>(ws[j], ns[j], parts, stride,
                                                                              partials + 2 * j * size_t(stride));
    TRAINER_CUDA_CHECK_LAUNCH(ctx, "abs_and_square_sums");
  }
  sum_partials(ctx, partials, int(rows), stride, sums);
  return sums;
}

void abs_and_square_sums(const Device& d, const float* const* ws, const size_t* ns, size_t k, double* sums_host) {
  if (k == 0) return;
  CudaContext& ctx = context(d);
  ctx.read_back(sums_host, queue_abs_and_square_sums(ctx, ws, ns, k), 2 * k * sizeof(double));
}

void regularizer_grad(const Device& d, const float* w, float* g, size_t n, float l1, float l2) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), RegularizerGrad{w, g, l1, l2}, n, aligned16(w, g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "regularizer_grad");
}

}  // namespace trainer::cuda
