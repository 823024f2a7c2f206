// keras.optimizers.Adam (Keras 3's update_step; tf.keras 2's agrees), t = iterations + 1:
//   lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
//   m = beta_1 m + (1 - beta_1) g;  v = beta_2 v + (1 - beta_2) g^2
//   w = w - lr_t * m / (sqrt(v) + epsilon)          (epsilon default 1e-7)
// with amsgrad (Reddi et al. 2018) v_hat = max(v_hat, v) and sqrt(v_hat) in
// the update. lr_t is computed here in double; the backend's adam_step does the rest.
#include <cmath>

#include "backend/train_ops.h"
#include "train/optimizer.h"

namespace trainer {

namespace {

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerConfig& cfg, size_t n, const Device& d)
      : Optimizer(cfg, n, d),
        b1_(cfg.beta_1), b2_(cfg.beta_2), eps_(cfg.epsilon), m_(zero_slot()), v_(zero_slot()) {
    if (cfg.amsgrad) v_hat_ = zero_slot();
  }

  void apply(float* w, const float* g, size_t begin, size_t end) override {
    const double t = double(iterations_ + 1);
    const float lr_t =
        float(current_learning_rate() * std::sqrt(1.0 - std::pow(b2_, t)) / (1.0 - std::pow(b1_, t)));
    OptimizerArrays a;
    a.w = w + begin, a.g = g + begin, a.n = end - begin;
    a.m = m_.data() + begin, a.v = v_.data() + begin;
    if (v_hat_.size()) a.v_hat = v_hat_.data() + begin;
    adam_step(device_, a, AdamParams{lr_t, float(b1_), float(b2_), float(eps_)});
  }

  std::vector<std::pair<std::string, Buffer<float>*>> state() override {
    if (!v_hat_.size()) return {{"m", &m_}, {"v", &v_}};
    return {{"m", &m_}, {"v", &v_}, {"vhat", &v_hat_}};
  }

 private:
  double b1_, b2_, eps_;
  Buffer<float> m_, v_, v_hat_;  ///< v_hat: amsgrad's running maximum of v (empty without)
};

}  // namespace

std::unique_ptr<Optimizer> make_adam(const OptimizerConfig& cfg, size_t n_params, const Device& d) {
  return std::make_unique<Adam>(cfg, n_params, d);
}

}  // namespace trainer
