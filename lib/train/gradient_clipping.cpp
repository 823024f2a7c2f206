#include "train/gradient_clipping.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/elementwise_ops.h"
#include "backend/train_ops.h"

namespace trainer {

GradientClipping::GradientClipping(const OptimizerConfig& cfg, const std::vector<WeightSlot>& weights, float* grads,
                                   const Device& d)
    : clipnorm_(cfg.clipnorm), global_clipnorm_(cfg.global_clipnorm), clipvalue_(cfg.clipvalue), device_(d),
      grads_(grads) {
  if (!by_norm()) return;
  size_t total = 0;
  for (const WeightSlot& w : weights)
    if (w.spec.trainable && w.spec.numel() > 0) {
      starts_.push_back(grads + w.offset);
      sizes_.push_back(w.spec.numel());
      total += w.spec.numel();
    }
  // global_clipnorm needs one norm: that of the whole buffer (the trainable
  // weights' gradients are all of it, nn/model.h), one span.
  if (global_clipnorm_ > 0 && total > 0) starts_ = {grads}, sizes_ = {total};
  sums_.resize(2 * starts_.size());
}

void GradientClipping::clip_norms() {
  if (!by_norm() || starts_.empty()) return;
  abs_and_square_sums(device_, starts_.data(), sizes_.data(), starts_.size(), sums_.data());
  // g * c / max(norm, c) as Keras: a factor of 1 leaves the gradient as it is.
  auto factor = [](double square_sum, double c) { return c / std::max(std::sqrt(square_sum), c); };
  if (clipnorm_ > 0) {
    for (size_t j = 0; j < starts_.size(); ++j) {
      const double f = factor(sums_[2 * j + 1], clipnorm_);
      if (f < 1) scale_shift_forward(device_, starts_[j], float(f), 0.f, starts_[j], sizes_[j]);
    }
    return;
  }
  const double total = sums_[1];
  const double f = std::isfinite(total) ? factor(total, global_clipnorm_) : std::numeric_limits<double>::quiet_NaN();
  if (!(f >= 1)) scale_shift_forward(device_, grads_, float(f), 0.f, grads_, sizes_[0]);  // below 1, or NaN
}

void GradientClipping::clip_values(size_t begin, size_t end) {
  if (clipvalue_ > 0 && end > begin) clip_by_value(device_, grads_ + begin, end - begin, float(clipvalue_));
}

}  // namespace trainer
