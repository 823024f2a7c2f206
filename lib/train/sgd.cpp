// keras.optimizers.SGD (Keras 3's update_step; tf.keras 2's agrees): with momentum,
//   velocity = momentum * velocity - lr * g
//   w = w + momentum * velocity - lr * g   (nesterov)
//   w = w + velocity                       (otherwise)
// and w = w - lr * g when momentum is 0 (backend sgd_step).
#include "backend/train_ops.h"
#include "train/optimizer.h"

namespace trainer {

namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerConfig& cfg, size_t n, const Device& d)
      : Optimizer(cfg, n, d), momentum_(float(cfg.momentum)), nesterov_(cfg.nesterov) {
    if (keeps_momentum_slot(cfg)) velocity_ = zero_slot();
  }

  void apply(float* w, const float* g, size_t begin, size_t end) override {
    OptimizerArrays a;
    a.w = w + begin, a.g = g + begin, a.n = end - begin;
    if (momentum_ != 0.f) a.momentum = velocity_.data() + begin;
    sgd_step(device_, a, SgdParams{float(current_learning_rate()), momentum_, nesterov_});
  }

  std::vector<std::pair<std::string, Buffer<float>*>> state() override {
    if (momentum_ == 0.f) return {};
    return {{"momentum", &velocity_}};
  }

 private:
  float momentum_;
  bool nesterov_;
  Buffer<float> velocity_;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(const OptimizerConfig& cfg, size_t n_params, const Device& d) {
  return std::make_unique<Sgd>(cfg, n_params, d);
}

}  // namespace trainer
