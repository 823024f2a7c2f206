#include "train/gradient_clipping.h"

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
}

void GradientClipping::clip_norms() {
  if (!by_norm() || starts_.empty()) return;
  const bool global = global_clipnorm_ > 0;
  clip_by_norm(device_, starts_.data(), sizes_.data(), starts_.size(), global ? global_clipnorm_ : clipnorm_, global);
}

void GradientClipping::clip_values(size_t begin, size_t end) {
  if (clipvalue_ > 0 && end > begin) clip_by_value(device_, grads_ + begin, end - begin, float(clipvalue_));
}

}  // namespace trainer
