#include "train/lr_schedule.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>

namespace trainer {

namespace {

double cosine(double r0, double alpha, double t, double d) {
  const double decayed = 0.5 * (1.0 + std::cos(M_PI * std::min(t, d) / d));
  return r0 * ((1.0 - alpha) * decayed + alpha);
}

}  // namespace

double scheduled_learning_rate(const LearningRateSchedule& s, int64_t step) {
  const double t = double(step), d = s.decay_steps, r0 = s.initial_learning_rate;
  if (s.type == "ExponentialDecay") {
    const double p = s.staircase ? std::floor(t / d) : t / d;
    return r0 * std::pow(s.decay_rate, p);
  }
  if (s.type == "InverseTimeDecay") {
    const double p = s.staircase ? std::floor(t / d) : t / d;
    return r0 / (1.0 + s.decay_rate * p);
  }
  if (s.type == "PolynomialDecay") {
    double steps = d, at = std::min(t, d);
    if (s.cycle) steps = d * (t == 0 ? 1.0 : std::ceil(t / d)), at = t;
    return (r0 - s.end_learning_rate) * std::pow(1.0 - at / steps, s.power) + s.end_learning_rate;
  }
  if (s.type == "PiecewiseConstantDecay") {
    size_t i = 0;
    while (i < s.boundaries.size() && t > s.boundaries[i]) ++i;
    return s.values[i];
  }
  // CosineDecay
  if (!s.warmup) return cosine(r0, s.alpha, t, d);
  const double capped = std::min(t, d + s.warmup_steps);
  if (capped < s.warmup_steps) return r0 + (s.warmup_target - r0) * capped / s.warmup_steps;
  return cosine(s.warmup_target, s.alpha, capped - s.warmup_steps, d);
}

std::string schedule_text(const LearningRateSchedule& s) {
  // Numbers in their shortest exact form, so that any change shows (resume compares these texts).
  auto list = [](const std::vector<double>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); };
  auto flag = [](bool b) { return b ? "true" : "false"; };
  if (s.type == "PiecewiseConstantDecay")
    return fmt::format("{}(boundaries={}, values={})", s.type, list(s.boundaries), list(s.values));
  std::string text = fmt::format("{}(initial_learning_rate={}, decay_steps={}", s.type, s.initial_learning_rate,
                                 s.decay_steps);
  if (s.type == "ExponentialDecay" || s.type == "InverseTimeDecay")
    text += fmt::format(", decay_rate={}, staircase={}", s.decay_rate, flag(s.staircase));
  if (s.type == "PolynomialDecay")
    text += fmt::format(", end_learning_rate={}, power={}, cycle={}", s.end_learning_rate, s.power, flag(s.cycle));
  if (s.type == "CosineDecay") {
    text += fmt::format(", alpha={}", s.alpha);
    if (s.warmup) text += fmt::format(", warmup_target={}, warmup_steps={}", s.warmup_target, s.warmup_steps);
  }
  return text + ")";
}

}  // namespace trainer
