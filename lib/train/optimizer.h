#pragma once
// Optimizers over one flat parameter buffer (all of a replica's weights are
// contiguous, as its gradients are, so one all-reduce and one step cover them).
// An optimizer lives on its tower's device: its state slots are Buffers there
// and step() runs the backend's update (backend/train_ops.h) there.
// Formulas are Keras 3's (keras.optimizers.SGD / Adam / RMSprop update_step, the
// same as tf.keras 2.11+'s and the TensorFlow training kernels), with the Keras 2 time-based
// decay lr_t = learning_rate / (1 + decay * iterations). weight_decay is the
// decoupled decay of Keras 3 (and tf.keras 2.11+) optimizers, AdamW's
// (Loshchilov & Hutter 2019): before each update, w <- w - lr_t * weight_decay * w
// with the optimizer's learning rate lr_t (not Adam's bias-corrected step size),
// for every trainable weight, biases and BatchNormalization's gamma and beta
// included, as Keras does by default.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "core/buffer.h"

namespace trainer {

class Optimizer {
 public:
  /// Takes cfg's learning_rate, decay and weight_decay.
  Optimizer(const OptimizerConfig& cfg, size_t n, const Device& d)
      : lr_(cfg.learning_rate), decay_(cfg.decay), weight_decay_(cfg.weight_decay), schedule_(cfg.schedule), n_(n),
        device_(d) {}
  virtual ~Optimizer() = default;
  /// params[i] -= update(grads[i]) for i < n (the n_params given to make_optimizer);
  /// grads already averaged over the global batch; both on device(). Increments
  /// iterations().
  void step(float* params, const float* grads) {
    update(params, grads, 0, n_);
    finish_step();
  }
  /// The update of the current step for elements [begin, end) only (params and
  /// grads point at element 0), so that gradient buckets can be applied as their
  /// all-reduce completes; every element must be updated once before finish_step().
  /// Applies the weight decay, then the optimizer's rule (apply()).
  void update(float* params, const float* grads, size_t begin, size_t end);
  /// Ends the current step: increments iterations().
  void finish_step() { ++iterations_; }
  /// Steps completed (Keras's optimizer.iterations).
  int64_t iterations() const { return iterations_; }
  /// Learning rate of the update at step t (t updates done before it): the
  /// schedule's (train/lr_schedule.h) when the config gives one, else with
  /// Keras 2 decay lr / (1 + decay * t); times the warm-up's factor (set_warmup).
  double learning_rate_at(int64_t t) const;
  /// Learning rate of the next step: learning_rate_at(iterations()).
  double current_learning_rate() const { return learning_rate_at(iterations_); }
  /// The learning rate before decay (Keras's optimizer.learning_rate; with a
  /// schedule, its first rate).
  double learning_rate() const { return lr_; }
  /// Replaces it (ReduceLROnPlateau, which a schedule excludes, or a resumed
  /// run's reduced rate); decay applies on top.
  void set_learning_rate(double lr) { lr_ = lr; }
  /// A gradual warm-up (train/batch_scaling.h): the rate of step t is
  /// multiplied by warmup_factor(t, steps, start). steps 0: none.
  void set_warmup(int64_t steps, double start) {
    warmup_steps_ = steps;
    warmup_start_ = start;
  }
  /// State for checkpoints: named flat float arrays of n values each on device(), in
  /// tf.keras 2's slot names (SGD: "momentum" when momentum > 0; Adam and AdamW: "m",
  /// "v", plus "vhat" with amsgrad; RMSprop: "rms", plus "momentum" when momentum > 0
  /// and "mg" when centered), plus iterations(). The pointers stay
  /// valid for the optimizer's lifetime; writing through them (e.g. copy_from_host)
  /// restores a state.
  virtual std::vector<std::pair<std::string, Buffer<float>*>> state() = 0;
  /// Restores the step counter (from a checkpoint).
  void set_iterations(int64_t it) { iterations_ = it; }
  /// Number of parameters this optimizer updates.
  size_t size() const { return n_; }

 protected:
  /// The optimizer's rule for elements [begin, end) of params, from grads.
  virtual void apply(float* params, const float* grads, size_t begin, size_t end) = 0;
  /// A state slot of size() zeros on the optimizer's device.
  Buffer<float> zero_slot() const {
    Buffer<float> b(device_, n_);
    b.zero();
    return b;
  }
  double lr_, decay_, weight_decay_;
  LearningRateSchedule schedule_;
  size_t n_;
  Device device_;
  int64_t iterations_ = 0;
  int64_t warmup_steps_ = 0;
  double warmup_start_ = 1.0;
};

/// Whether SGD or RMSprop under cfg keeps the "momentum" slot: its momentum, in
/// the float the update uses, is not 0 (false for Adam and AdamW, which have none).
inline bool keeps_momentum_slot(const OptimizerConfig& cfg) {
  return (cfg.type == OptimizerKind::SGD || cfg.type == OptimizerKind::RMSprop) && float(cfg.momentum) != 0.f;
}

/// Builds cfg.type (AdamW is Adam with its weight decay) for n_params
/// parameters on device d, state zeroed.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, size_t n_params, const Device& d);

// The concrete optimizers, one per file (sgd.cpp, adam.cpp, rmsprop.cpp).
std::unique_ptr<Optimizer> make_sgd(const OptimizerConfig& cfg, size_t n_params, const Device& d);
std::unique_ptr<Optimizer> make_adam(const OptimizerConfig& cfg, size_t n_params, const Device& d);
std::unique_ptr<Optimizer> make_rmsprop(const OptimizerConfig& cfg, size_t n_params, const Device& d);

}  // namespace trainer
