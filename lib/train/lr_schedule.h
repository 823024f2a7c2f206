#pragma once
// Learning-rate schedules of keras.optimizers.schedules (Keras 3's
// learning_rate_schedule.py), evaluated on the host in double at the step t
// an update is about to make (the optimizer's iterations: 0, 1, ...):
//   ExponentialDecay        r0 * decay_rate^(t / decay_steps)
//   InverseTimeDecay        r0 / (1 + decay_rate * t / decay_steps)
//                           (staircase: floor(t / decay_steps) in both)
//   PolynomialDecay         (r0 - end) * (1 - t' / d)^power + end, with t' =
//                           min(t, decay_steps) and d = decay_steps; with
//                           cycle, t' = t and d = decay_steps * ceil(t /
//                           decay_steps) (1 at t = 0)
//   PiecewiseConstantDecay  values[0] for t <= boundaries[0], values[i] for
//                           boundaries[i-1] < t <= boundaries[i], the last
//                           value after the last boundary
//   CosineDecay             r0 * ((1 - alpha) * (1 + cos(pi * t' / d)) / 2 +
//                           alpha), t' = min(t, d), d = decay_steps; with
//                           warmup_target w: for t < warmup_steps the line
//                           r0 + (w - r0) * t / warmup_steps, then the cosine
//                           from w over t - warmup_steps (t capped at
//                           decay_steps + warmup_steps).
//   CosineDecayRestarts     SGDR (Loshchilov & Hutter 2017): period i lasts
//                           first_decay_steps * t_mul^i steps; at fraction f
//                           of it: r0 * ((1 - alpha) * m_mul^i *
//                           (1 + cos(pi * f)) / 2 + alpha).
#include <cstdint>
#include <string>

#include "config/config.h"

namespace trainer {

/// The rate of schedule s at step t >= 0 (s.type not None).
double scheduled_learning_rate(const LearningRateSchedule& s, int64_t t);

/// One line naming the schedule and its values, as the config gives them,
/// e.g. "CosineDecay(initial_learning_rate=0.001, decay_steps=1000, alpha=0)".
std::string schedule_text(const LearningRateSchedule& s);

}  // namespace trainer
