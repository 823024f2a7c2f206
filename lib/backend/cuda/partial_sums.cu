// sum_partials (partial_sums.h): one warp per row of the [rows, parts] partials.
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/partial_sums.h"

namespace trainer::cuda {

namespace {

constexpr unsigned kWarp = 32;

/// Warp w of the grid sums row w (see sum_partials); blockDim.x is a multiple of 32.
__global__ void sum_partials_kernel(const double* partials, int rows, int parts, double* out) {
  const size_t row = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const unsigned lane = threadIdx.x % kWarp;
  if (row >= size_t(rows)) return;  // the whole warp leaves together
  const double* p = partials + row * size_t(parts);
  double s = 0.0;
  for (int b = int(lane); b < parts; b += int(kWarp)) s += p[b];
  for (unsigned offset = kWarp / 2; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
  if (lane == 0) out[row] = s;
}

}  // namespace

void sum_partials(CudaContext& ctx, const double* partials, int rows, int parts, double* out) {
  const unsigned warps_per_block = kThreads / kWarp;
  const unsigned blocks = unsigned((size_t(rows) + warps_per_block - 1) / warps_per_block);
  sum_partials_kernel<<<blocks, kThreads, 0, ctx.stream()>>>(partials, rows, parts, out);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "sum_partials");
}

}  // namespace trainer::cuda
