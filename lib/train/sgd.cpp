// tf.keras.optimizers.SGD (TF 2.x docs): with momentum,
//   velocity = momentum * velocity - lr * g
//   w = w + momentum * velocity - lr * g   (nesterov)
//   w = w + velocity                       (otherwise)
// and w = w - lr * g when momentum is 0.
#include "train/elementwise.h"
#include "train/optimizer.h"

namespace trainer {

namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerConfig& cfg, size_t n)
      : Optimizer(cfg.learning_rate, cfg.decay, n), momentum_(float(cfg.momentum)), nesterov_(cfg.nesterov) {
    if (momentum_ != 0.f) velocity_.assign(n, 0.f);
  }

  void step(float* w, const float* g) override {
    const float lr = float(current_learning_rate());
    const long long n = (long long)n_;
    if (momentum_ == 0.f) {
#pragma omp parallel for schedule(static)
      for (long long i = 0; i < n; ++i) w[i] -= lr * g[i];
    } else {
      float* vel = velocity_.data();
      const float mom = momentum_;
      const bool nesterov = nesterov_;
#pragma omp parallel for schedule(static)
      for (long long i = 0; i < n; ++i) sgd_momentum_update(w[i], vel[i], g[i], lr, mom, nesterov);
    }
    ++iterations_;
  }

  std::vector<std::pair<std::string, std::vector<float>*>> state() override {
    if (momentum_ == 0.f) return {};
    return {{"momentum", &velocity_}};
  }

 private:
  float momentum_;
  bool nesterov_;
  std::vector<float> velocity_;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(const OptimizerConfig& cfg, size_t n_params) {
  return std::make_unique<Sgd>(cfg, n_params);
}

}  // namespace trainer
