#include "train/lr_schedule.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace trainer {

namespace {

double cosine(double r0, double alpha, double t, double d) {
  const double decayed = 0.5 * (1.0 + std::cos(M_PI * std::min(t, d) / d));
  return r0 * ((1.0 - alpha) * decayed + alpha);
}

/// The restart i (0 first) that step t of CosineDecayRestarts falls in and the
/// fraction of that period done. Keras's closed form: with c = t / first,
/// i = floor(log(1 - c (1 - t_mul)) / log(t_mul)) (floor(c) when t_mul = 1),
/// the steps before it first * (1 - t_mul^i) / (1 - t_mul); i is then moved
/// by one where the logarithm rounded across a period's start.
std::pair<double, double> restart_period(double t, double first, double t_mul) {
  const double c = t / first;
  if (t_mul == 1.0) return {std::floor(c), c - std::floor(c)};
  auto before = [&](double i) { return (1.0 - std::pow(t_mul, i)) / (1.0 - t_mul); };  // periods' total, in firsts
  double i = std::floor(std::log(1.0 - c * (1.0 - t_mul)) / std::log(t_mul));
  if (before(i + 1) <= c) i += 1;
  if (i > 0 && before(i) > c) i -= 1;
  return {i, (c - before(i)) / std::pow(t_mul, i)};
}

}  // namespace

double scheduled_learning_rate(const LearningRateSchedule& s, int64_t step) {
  const double t = double(step), d = s.decay_steps, r0 = s.initial_learning_rate;
  if (s.type == ScheduleKind::ExponentialDecay) {
    const double p = s.staircase ? std::floor(t / d) : t / d;
    return r0 * std::pow(s.decay_rate, p);
  }
  if (s.type == ScheduleKind::InverseTimeDecay) {
    const double p = s.staircase ? std::floor(t / d) : t / d;
    return r0 / (1.0 + s.decay_rate * p);
  }
  if (s.type == ScheduleKind::PolynomialDecay) {
    double steps = d, at = std::min(t, d);
    if (s.cycle) steps = d * (t == 0 ? 1.0 : std::ceil(t / d)), at = t;
    return (r0 - s.end_learning_rate) * std::pow(1.0 - at / steps, s.power) + s.end_learning_rate;
  }
  if (s.type == ScheduleKind::PiecewiseConstantDecay) {
    size_t i = 0;
    while (i < s.boundaries.size() && t > s.boundaries[i]) ++i;
    return s.values[i];
  }
  if (s.type == ScheduleKind::CosineDecayRestarts) {
    const auto [i, f] = restart_period(t, d, s.t_mul);
    const double decayed = 0.5 * std::pow(s.m_mul, i) * (1.0 + std::cos(M_PI * f));
    return r0 * ((1.0 - s.alpha) * decayed + s.alpha);
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
  if (s.type == ScheduleKind::PiecewiseConstantDecay)
    return fmt::format("{}(boundaries={}, values={})", schedule_name(s.type), list(s.boundaries), list(s.values));
  std::string text = fmt::format("{}(initial_learning_rate={}, {}={}", schedule_name(s.type), s.initial_learning_rate,
                                 s.type == ScheduleKind::CosineDecayRestarts ? "first_decay_steps" : "decay_steps", s.decay_steps);
  if (s.type == ScheduleKind::ExponentialDecay || s.type == ScheduleKind::InverseTimeDecay)
    text += fmt::format(", decay_rate={}, staircase={}", s.decay_rate, flag(s.staircase));
  if (s.type == ScheduleKind::PolynomialDecay)
    text += fmt::format(", end_learning_rate={}, power={}, cycle={}", s.end_learning_rate, s.power, flag(s.cycle));
  if (s.type == ScheduleKind::CosineDecay) {
    text += fmt::format(", alpha={}", s.alpha);
    if (s.warmup) text += fmt::format(", warmup_target={}, warmup_steps={}", s.warmup_target, s.warmup_steps);
  }
  if (s.type == ScheduleKind::CosineDecayRestarts)
    text += fmt::format(", t_mul={}, m_mul={}, alpha={}", s.t_mul, s.m_mul, s.alpha);
  return text + ")";
}

}  // namespace trainer
