#include "train/optimizer.h"

#include "core/error.h"

namespace trainer {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, size_t n_params, const Device& d) {
  if (cfg.type == "SGD") return make_sgd(cfg, n_params, d);
  if (cfg.type == "Adam") return make_adam(cfg, n_params, d);
  if (cfg.type == "RMSprop") return make_rmsprop(cfg, n_params, d);
  throw UserError("training.optimizer.type: unknown optimizer '" + cfg.type +
                  "'; use one of SGD, Adam, RMSprop (Keras class names)");
}

}  // namespace trainer
