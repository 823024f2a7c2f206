// tf.keras.optimizers.RMSprop (TF 2.x docs, centered=False):
//   rms = rho rms + (1 - rho) g^2
//   momentum == 0: w = w - lr * g / (sqrt(rms) + epsilon)
//   momentum  > 0: mom = momentum mom + lr * g / sqrt(rms + epsilon); w = w - mom
// (the second is TensorFlow's ApplyRMSProp kernel, which Keras calls when momentum > 0).
#include "train/elementwise.h"
#include "train/optimizer.h"

namespace trainer {

namespace {

class RmsProp final : public Optimizer {
 public:
  RmsProp(const OptimizerConfig& cfg, size_t n)
      : Optimizer(cfg.learning_rate, cfg.decay, n),
        rho_(float(cfg.rho)), momentum_(float(cfg.momentum)), eps_(float(cfg.epsilon)), rms_(n, 0.f) {
    if (momentum_ != 0.f) mom_.assign(n, 0.f);
  }

  void step(float* w, const float* g) override {
    const float lr = float(current_learning_rate());
    const float rho = rho_, momentum = momentum_, eps = eps_;
    float* rms = rms_.data();
    const long long n = (long long)n_;
    if (momentum == 0.f) {
#pragma omp parallel for schedule(static)
      for (long long i = 0; i < n; ++i) rmsprop_update(w[i], rms[i], g[i], lr, rho, eps);
    } else {
      float* mom = mom_.data();
#pragma omp parallel for schedule(static)
      for (long long i = 0; i < n; ++i) rmsprop_momentum_update(w[i], rms[i], mom[i], g[i], lr, rho, momentum, eps);
    }
    ++iterations_;
  }

  std::vector<std::pair<std::string, std::vector<float>*>> state() override {
    if (momentum_ == 0.f) return {{"rms", &rms_}};
    return {{"rms", &rms_}, {"momentum", &mom_}};
  }

 private:
  float rho_, momentum_, eps_;
  std::vector<float> rms_, mom_;
};

}  // namespace

std::unique_ptr<Optimizer> make_rmsprop(const OptimizerConfig& cfg, size_t n_params) {
  return std::make_unique<RmsProp>(cfg, n_params);
}

}  // namespace trainer
