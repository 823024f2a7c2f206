#pragma once
// Deterministic reductions over the pixels of each (sample, channel) of an
// NHWC tensor [N, H, W, C] on a GPU: GlobalAveragePooling2D's sums,
// GlobalMaxPooling2D's maxima and tie counts, the gradients of Multiply's
// and Add's [1, 1, C] inputs, LayerNormalization's weight gradients. The H*W
// pixels of a sample are cut into `parts` fixed ranges (a function of the
// shape only, not of the GPU); block (range,
// channel tile, sample) has 32 channels x 8 pixel lanes, lane l folding
// pixels l, l + 8, ... of its range, then the lanes in order; its partial per
// channel goes to the context's workspace, and a second kernel folds each
// (sample, channel)'s partials in range order and writes op.finish(value).
// The ranges depend on H, W and C only, so a sample's result is the same on
// every run, every GPU and for any batch it is part of (no atomics).
// (LayerNormalization's weight gradients reduce [1, rows, 1, C], the tower's
// pixels as one sample: their ranges follow the tower's batch, fixed for a
// given split.)
//
// An Op has: using Value = ...; __device__ Value identity() const;
// __device__ Value combine(Value, Value) const; __device__ Value term(size_t
// e, size_t row) const (element e of the tensor, row = n * C + c);
// __device__ Out finish(Value) const (float, or GroupNormalization's pairs of sums).
#include <algorithm>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/elementwise_math.h"
#include "core/shape.h"

namespace trainer::cuda {

/// Channels per block (a warp reads 32 consecutive channels of a pixel) and pixel lanes per block.
constexpr int kReduceTile = 32, kReduceLanes = int(kThreads) / kReduceTile;
/// Pixels per range below which fewer ranges are used, and the blocks aimed at per sample.
constexpr long long kReducePixelsPerPart = 1024, kReduceBlocks = 2048;
/// Largest gridDim.z; larger batches loop.
constexpr int kMaxGridZ = 65535;

template <class Op>
__global__ void sample_channel_partials_kernel(Op op, int N, long long HW, int C, int parts,
                                               typename Op::Value* partials) {
  using V = typename Op::Value;
  __shared__ V lanes[kThreads];
  const int tx = int(threadIdx.x) % kReduceTile, ty = int(threadIdx.x) / kReduceTile;
  const int c = int(blockIdx.y) * kReduceTile + tx, b = int(blockIdx.x);
  for (int n = int(blockIdx.z); n < N; n += int(gridDim.z)) {
    V acc = op.identity();
    if (c < C) {
      const size_t row = size_t(n) * size_t(C) + size_t(c);
      const long long end = HW * (b + 1) / parts;
      for (long long p = HW * b / parts + ty; p < end; p += kReduceLanes)
        acc = op.combine(acc, op.term((size_t(n) * size_t(HW) + size_t(p)) * size_t(C) + size_t(c), row));
    }
    lanes[threadIdx.x] = acc;
    __syncthreads();
    if (ty == 0 && c < C) {
      V r = lanes[tx];
      for (int l = 1; l < kReduceLanes; ++l) r = op.combine(r, lanes[l * kReduceTile + tx]);
      partials[(size_t(n) * size_t(C) + size_t(c)) * size_t(parts) + size_t(b)] = r;
    }
    __syncthreads();
  }
}

template <class Op, class Out>
__global__ void sample_channel_finish_kernel(Op op, const typename Op::Value* partials, size_t rows, int parts,
                                             Out* out) {
  for (size_t row = size_t(blockIdx.x) * blockDim.x + threadIdx.x; row < rows; row += size_t(gridDim.x) * blockDim.x) {
    const typename Op::Value* p = partials + row * size_t(parts);
    typename Op::Value r = p[0];
    for (int b = 1; b < parts; ++b) r = op.combine(r, p[b]);
    out[row] = op.finish(r);
  }
}

/// out [N, C] (device) <- op.finish of the fold of op.term over the pixels of
/// each (sample, channel) of a tensor of shape s, queued on ctx's compute
/// stream (nothing for an empty s). Out is op.finish's type (float for the
/// poolings). Uses ctx's workspace.
template <class Op, class Out>
void reduce_sample_channels(CudaContext& ctx, const Op& op, Shape s, Out* out) {
  using V = typename Op::Value;
  if (s.numel() == 0) return;
  const long long HW = (long long)s.h * s.w;
  const int tiles = (s.c + kReduceTile - 1) / kReduceTile;
  // From the sample's shape only, not the batch: a sample's sums are added in
  // the same order whatever the tower's share of the batch.
  const long long by_size = (HW + kReducePixelsPerPart - 1) / kReducePixelsPerPart;
  const long long by_blocks = std::max(1LL, kReduceBlocks / tiles);
  const int parts = int(std::max(1LL, std::min(by_size, by_blocks)));
  const size_t rows = size_t(s.n) * size_t(s.c);
  V* partials = static_cast<V*>(ctx.workspace(sizeof(V) * rows * size_t(parts)));
  const dim3 grid(unsigned(parts), unsigned(tiles), unsigned(std::min(s.n, kMaxGridZ)));
  sample_channel_partials_kernel<<<grid, kThreads, 0, ctx.stream()>>>(op, s.n, HW, s.c, parts, partials);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "sample_channel_partials");
  sample_channel_finish_kernel<<<grid_blocks(rows), kThreads, 0, ctx.stream()>>>(op, partials, rows, parts, out);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "sample_channel_finish");
}

/// y[e] <- op(a[e], s[row of e]) for elementwise_kernel: a tensor combined
/// with one value per (sample, channel) (Multiply's and Add's [1, 1, C]
/// inputs). quad() is unused (launched without vec).
template <class Op>
struct RowBroadcast {
  const float* a;
  const float* s;
  float* y;
  unsigned long long HWC, C;
  Op op;
  template <class I>
  __device__ void one(I e) const {
    y[e] = op(a[e], s[sample_channel_row(size_t(e), size_t(HWC), size_t(C))]);
  }
  template <class I>
  __device__ void quad(I) const {}
};

/// x[e] in double, a term of a plain sum (SumOp<Element>).
struct Element {
  const float* x;
  __device__ double operator()(size_t e, size_t) const { return double(x[e]); }
};

/// Op of a sum in double of per-element terms T (a functor (e, row) -> double),
/// finished as float(sum / divisor) (the CPU's formulas).
template <class T>
struct SumOp {
  using Value = double;
  T term_of;
  double divisor;
  __device__ double identity() const { return 0.0; }
  __device__ double combine(double a, double b) const { return a + b; }
  __device__ double term(size_t e, size_t row) const { return term_of(e, row); }
  __device__ float finish(double v) const { return float(v / divisor); }
};

}  // namespace trainer::cuda
