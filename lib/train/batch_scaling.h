#pragma once
// The global batch and learning rate of a run from training.batch_size_per_device
// and learning_rate_scaling (config.h), once the run's towers are known, and
// the gradual warm-up of Goyal et al. 2017, "Accurate, Large Minibatch SGD:
// Training ImageNet in 1 Hour", section 2: with k times the batch, k times the
// learning rate (linear; sqrt: sqrt(k), as Krizhevsky 2014 argues), reached
// by a linear ramp from the unscaled rate over the first epochs.
#include <cstdint>

#include "config/config.h"

namespace trainer {

/// For a run of `towers` towers (every process's): with batch_size_per_device,
/// batch_size <- batch_size_per_device * towers and, under learning_rate_scaling,
/// optimizer.learning_rate times k = towers (linear) or sqrt(k) (sqrt).
/// Returns the factor applied to the learning rate (1 when none).
double resolve_batch_scaling(TrainingConfig& t, int towers);

/// The multiplier of the scaled learning rate at step t (updates made before
/// it) during a warm-up of warmup_steps steps from start (1 / the scaling
/// factor): start + (1 - start) * t / warmup_steps for t < warmup_steps,
/// then 1.
double warmup_factor(int64_t t, int64_t warmup_steps, double start);

}  // namespace trainer
