#include "train/optimizer.h"

#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "train/batch_scaling.h"
#include "train/lr_schedule.h"

namespace trainer {

double Optimizer::learning_rate_at(int64_t t) const {
  const double warmup = warmup_factor(t, warmup_steps_, warmup_start_);
  if (schedule_.type != ScheduleKind::None) return warmup * scheduled_learning_rate(schedule_, t);
  return warmup * lr_ / (1.0 + decay_ * double(t));
}

void Optimizer::update(float* params, const float* grads, size_t begin, size_t end) {
  if (weight_decay_ > 0.0 && end > begin) {
    const float keep = float(1.0 - current_learning_rate() * weight_decay_);
    scale_shift_forward(device_, params + begin, keep, 0.f, params + begin, end - begin);
  }
  apply(params, grads, begin, end);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, size_t n_params, const Device& d) {
  switch (cfg.type) {
    case OptimizerKind::SGD: return make_sgd(cfg, n_params, d);
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW: return make_adam(cfg, n_params, d);
    case OptimizerKind::RMSprop: return make_rmsprop(cfg, n_params, d);
  }
  throw InternalError("make_optimizer: an optimizer kind without a maker");
}

}  // namespace trainer
