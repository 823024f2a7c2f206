#pragma once
// Keras's gradient clipping (the optimizers' clipnorm, global_clipnorm and
// clipvalue arguments; keras.optimizers.Optimizer._clip_gradients), applied
// to one tower's gradient buffer after the all-reduce, so to the global
// batch's mean gradient with the regularizers' terms, before the weight decay
// and the update. Every tower clips its own copy of the same reduced
// gradients, so the towers stay identical.
//   clipnorm c:        g_j <- g_j * c / max(||g_j||, c) for each weight j
//                      (a Keras variable: a kernel, a bias, a gamma, ...)
//   global_clipnorm c: g <- g * c / max(||g||, c), ||g|| over all the
//                      weights (tf.clip_by_global_norm); a norm that is not
//                      finite makes every gradient NaN, as there
//   clipvalue v:       each element clamped to [-v, v] (tf.clip_by_value)
// The norms are sums of squares in double over a fixed partition (backend
// clip_by_norm), the same bits on every tower; on a GPU the norms and factors
// stay on the device (the host never waits for them), and the updates wait for
// every bucket's all-reduce, not for their own only.
#include <cstddef>
#include <vector>

#include "config/config.h"
#include "core/device.h"
#include "nn/model.h"

namespace trainer {

class GradientClipping {
 public:
  /// cfg's clipnorm, global_clipnorm, clipvalue (at most one > 0) over the
  /// trainable weights of `weights`, whose gradients sit at their offsets in
  /// grads (a tower's gradient buffer on device d).
  GradientClipping(const OptimizerConfig& cfg, const std::vector<WeightSlot>& weights, float* grads,
                   const Device& d);
  /// True with clipnorm or global_clipnorm: clip_norms() needs every gradient
  /// final (all buckets reduced) before any update.
  bool by_norm() const { return clipnorm_ > 0 || global_clipnorm_ > 0; }
  /// Scales the gradients by clipnorm or global_clipnorm (nothing otherwise).
  void clip_norms();
  /// Clamps elements [begin, end) of the gradients by clipvalue (nothing
  /// without it): a bucket, once reduced.
  void clip_values(size_t begin, size_t end);

 private:
  double clipnorm_, global_clipnorm_, clipvalue_;
  Device device_;
  float* grads_;
  std::vector<float*> starts_;       ///< Each trainable weight's gradient.
  std::vector<size_t> sizes_;
};

}  // namespace trainer
