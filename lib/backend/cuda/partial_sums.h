#pragma once
// The second pass of the deterministic reductions of lib/backend/cuda (batch
// norm's channel sums, the loss's per-sample sums): a first kernel writes one
// partial sum per (row, block) of a fixed partition, and sum_partials adds each
// row's partials in a fixed order. For a fixed partition the result is the
// same on every run and every GPU (no atomics, no dependence on the SM count).
#include "backend/cuda/cuda_context.h"

namespace trainer::cuda {

/// out[r] <- the sum of partials[r * parts + b] over b < parts, for r < rows
/// (device arrays, rows > 0, parts > 0), queued on ctx's compute stream. One
/// warp per row: lane l adds b = l, l + 32, ... in turn, then the 32 lane sums
/// meet in a fixed shuffle tree.
void sum_partials(CudaContext& ctx, const double* partials, int rows, int parts, double* out);

/// Queues abs_and_square_sums (backend/train_ops.h) on ctx's compute stream
/// and returns the device array [k, 2] that will hold the sums (in ctx's
/// workspace: valid until its next use); k > 0. ws and ns are host arrays.
const double* queue_abs_and_square_sums(CudaContext& ctx, const float* const* ws, const size_t* ns, size_t k);

}  // namespace trainer::cuda
