// tf.keras.optimizers.Adam (TF 2.x docs, amsgrad=False), t = iterations + 1:
//   lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
//   m = beta_1 m + (1 - beta_1) g;  v = beta_2 v + (1 - beta_2) g^2
//   w = w - lr_t * m / (sqrt(v) + epsilon)          (epsilon default 1e-7)
#include <cmath>

#include "train/elementwise.h"
#include "train/optimizer.h"

namespace trainer {

namespace {

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerConfig& cfg, size_t n)
      : Optimizer(cfg.learning_rate, cfg.decay, n),
        b1_(cfg.beta_1), b2_(cfg.beta_2), eps_(cfg.epsilon), m_(n, 0.f), v_(n, 0.f) {}

  void step(float* w, const float* g) override {
    const double t = double(iterations_ + 1);
    const float lr_t =
        float(current_learning_rate() * std::sqrt(1.0 - std::pow(b2_, t)) / (1.0 - std::pow(b1_, t)));
    const float b1 = float(b1_), b2 = float(b2_), eps = float(eps_);
    float* m = m_.data();
    float* v = v_.data();
    const long long n = (long long)n_;
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < n; ++i) adam_update(w[i], m[i], v[i], g[i], lr_t, b1, b2, eps);
    ++iterations_;
  }

  std::vector<std::pair<std::string, std::vector<float>*>> state() override {
    return {{"m", &m_}, {"v", &v_}};
  }

 private:
  double b1_, b2_, eps_;
  std::vector<float> m_, v_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adam(const OptimizerConfig& cfg, size_t n_params) {
  return std::make_unique<Adam>(cfg, n_params);
}

}  // namespace trainer
