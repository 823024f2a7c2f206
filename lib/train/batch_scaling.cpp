#include "train/batch_scaling.h"

#include <cmath>

namespace trainer {

double resolve_batch_scaling(TrainingConfig& t, int towers) {
  if (t.batch_size_per_device == 0) return 1.0;
  t.batch_size = t.batch_size_per_device * towers;
  const double k = t.learning_rate_scaling == LearningRateScaling::Linear ? double(towers)
                   : t.learning_rate_scaling == LearningRateScaling::Sqrt ? std::sqrt(double(towers))
                                                        : 1.0;
  t.optimizer.learning_rate *= k;
  return k;
}

double warmup_factor(int64_t t, int64_t warmup_steps, double start) {
  if (t >= warmup_steps || warmup_steps <= 0) return 1.0;
  return start + (1.0 - start) * double(t) / double(warmup_steps);
}

}  // namespace trainer
