#pragma once
// Backend ops of the training loop: the loss's per-sample sums and gradient,
// the metrics' logit histogram and the optimizers' updates, on a tower's
// device (dispatch in backend/op_dispatch.cpp; CPU in backend/cpu/, CUDA in
// backend/cuda/), each declared once, with its contract, in
// backend/train_ops.inc. Per-element math comes from train-side TRAINER_HD functions
// (backend/train_math.h), shared by both devices. Pointers are on the device d
// unless a comment says host. Results that the host needs (sums, histograms)
// are returned in host memory: on a GPU such a call waits for the tower's
// compute stream.
#include <cstddef>
#include <cstdint>

#include "backend/train_math.h"
#include "core/device.h"

namespace trainer {

/// Number of metric thresholds (0.50, 0.55, ..., 0.95).
inline constexpr int kLogitThresholds = 10;

#define TRAINER_OP(ret, name, params, args) ret name params;
#include "backend/train_ops.inc"
#undef TRAINER_OP

}  // namespace trainer
