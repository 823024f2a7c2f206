#include "train/resume_check.h"

#include <sstream>

#include "core/error.h"

namespace trainer {

namespace {

template <typename T>
void compare(std::vector<std::string>& out, const std::string& key, const T& now, const T& then) {
  if (now == then) return;
  std::ostringstream s;
  s << key << " is " << now << " (the checkpoint's run used " << then << ")";
  out.push_back(s.str());
}

}  // namespace

std::vector<std::string> resume_differences(const Config& now, const Config& then, const std::string& source) {
  const OptimizerConfig &a = now.training.optimizer, &b = then.training.optimizer;
  if (a.type != b.type)
    throw UserError(source + " was trained with the " + b.type + " optimizer, the config says " + a.type +
                    "; its state cannot carry over: set training.optimizer.type to " + b.type + " to resume");
  std::vector<std::string> out;
  compare(out, "training.optimizer.learning_rate", a.learning_rate, b.learning_rate);
  compare(out, "training.optimizer.momentum", a.momentum, b.momentum);
  compare(out, "training.optimizer.nesterov", a.nesterov, b.nesterov);
  compare(out, "training.optimizer.decay", a.decay, b.decay);
  compare(out, "training.optimizer.beta_1", a.beta_1, b.beta_1);
  compare(out, "training.optimizer.beta_2", a.beta_2, b.beta_2);
  compare(out, "training.optimizer.epsilon", a.epsilon, b.epsilon);
  compare(out, "training.optimizer.rho", a.rho, b.rho);
  compare(out, "training.loss", now.training.loss, then.training.loss);
  compare(out, "training.batch_size", now.training.batch_size, then.training.batch_size);
  compare(out, "training.seed", now.training.seed, then.training.seed);
  compare(out, "data.validation_split", now.data.validation_split, then.data.validation_split);
  compare(out, "data.shuffle", now.data.shuffle, then.data.shuffle);
  compare(out, "data.images", now.data.images, then.data.images);
  compare(out, "data.masks", now.data.masks, then.data.masks);
  return out;
}

}  // namespace trainer
