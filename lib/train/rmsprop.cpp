// keras.optimizers.RMSprop (Keras 3's update_step; tf.keras 2.11+'s optimizer
// and TensorFlow's ApplyRMSProp / ApplyCenteredRMSProp kernels agree):
//   rms = rho rms + (1 - rho) g^2; s = rms, or centered: mg = rho mg + (1 - rho) g, s = rms - mg^2
//   momentum == 0: w = w - lr * g / sqrt(s + epsilon)
//   momentum  > 0: mom = momentum mom + lr * g / sqrt(s + epsilon); w = w - mom
// backend rmsprop_step.
#include "backend/train_ops.h"
#include "train/optimizer.h"

namespace trainer {

namespace {

class RmsProp final : public Optimizer {
 public:
  RmsProp(const OptimizerConfig& cfg, size_t n, const Device& d)
      : Optimizer(cfg, n, d),
        rho_(float(cfg.rho)), momentum_(float(cfg.momentum)), eps_(float(cfg.epsilon)), rms_(zero_slot()) {
    if (keeps_momentum_slot(cfg)) mom_ = zero_slot();
    if (cfg.centered) mg_ = zero_slot();
  }

  void apply(float* w, const float* g, size_t begin, size_t end) override {
    OptimizerArrays a;
    a.w = w + begin, a.g = g + begin, a.n = end - begin;
    a.rms = rms_.data() + begin;
    if (mg_.size()) a.mg = mg_.data() + begin;
    if (momentum_ != 0.f) a.momentum = mom_.data() + begin;
    rmsprop_step(device_, a, RmspropParams{float(current_learning_rate()), rho_, momentum_, eps_});
  }

  std::vector<std::pair<std::string, Buffer<float>*>> state() override {
    std::vector<std::pair<std::string, Buffer<float>*>> slots = {{"rms", &rms_}};
    if (momentum_ != 0.f) slots.emplace_back("momentum", &mom_);
    if (mg_.size()) slots.emplace_back("mg", &mg_);
    return slots;
  }

 private:
  float rho_, momentum_, eps_;
  Buffer<float> rms_, mom_, mg_;  ///< mg: centered's mean gradient (empty without)
};

}  // namespace

std::unique_ptr<Optimizer> make_rmsprop(const OptimizerConfig& cfg, size_t n_params, const Device& d) {
  return std::make_unique<RmsProp>(cfg, n_params, d);
}

}  // namespace trainer
