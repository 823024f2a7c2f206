#pragma once
// Backend ops of the training loop: the loss's per-sample sums and gradient,
// the metrics' logit histogram and the optimizers' updates, on a tower's
// device (dispatch in backend/op_list_dispatch.cpp; CPU in backend/cpu/, CUDA in
// backend/cuda/), each declared once, with its contract, in
// backend/train_ops.inc. Per-element math comes from train-side TRAINER_HD functions
// (backend/train_math.h), shared by both devices. Pointers are on the device d
// unless a comment says host. Results that the host needs (sums, histograms)
// are returned in host memory: on a GPU such a call waits for the tower's
// compute stream.
#include <cstddef>
#include <cstdint>

#include "backend/augment_math.h"
#include "backend/train_math.h"
#include "core/device.h"

namespace trainer {

/// Number of metric thresholds (0.50, 0.55, ..., 0.95).
inline constexpr int kLogitThresholds = 10;

/// The flat arrays one optimizer step updates, each [n] on the device: the
/// weights, their gradient and the optimizer's slots (Keras's slot names);
/// a slot the step does not use is nullptr.
struct OptimizerArrays {
  float* w = nullptr;
  const float* g = nullptr;
  size_t n = 0;
  float* momentum = nullptr;  ///< SGD's and RMSprop's "momentum" (the velocity).
  float* m = nullptr;         ///< Adam's "m": the first moment.
  float* v = nullptr;         ///< Adam's "v": the second moment.
  float* v_hat = nullptr;     ///< Adam's "vhat": amsgrad's running maximum of v, or nullptr (no amsgrad).
  float* rms = nullptr;       ///< RMSprop's "rms": the mean square.
  float* mg = nullptr;        ///< RMSprop's "mg": the mean gradient (centered), or nullptr.
};

// The optimizers' coefficients for one step (keras.optimizers' names; no
// defaults: the caller gives each).

/// keras.optimizers.SGD's step: learning rate, momentum and nesterov (both
/// used with the momentum slot only).
struct SgdParams {
  float lr = 0.f, momentum = 0.f;
  bool nesterov = false;
};

/// keras.optimizers.Adam's step with the bias-corrected rate lr_t.
struct AdamParams {
  float lr_t = 0.f, beta_1 = 0.f, beta_2 = 0.f, epsilon = 0.f;
};

/// keras.optimizers.RMSprop's step: learning rate, rho, momentum (used with
/// the momentum slot only) and epsilon.
struct RmspropParams {
  float lr = 0.f, rho = 0.f, momentum = 0.f, epsilon = 0.f;
};

#define TRAINER_OP(ret, name, params, args) ret name params;
#include "backend/train_ops.inc"
#undef TRAINER_OP

}  // namespace trainer
