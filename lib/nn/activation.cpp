#include "nn/activation.h"

#include "config/params.h"

namespace trainer {

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = {"linear", "relu", "sigmoid"};
  return names;
}

std::string activation_name(Activation a) { return activation_names()[int(a)]; }

Activation read_activation(ParamReader& p, const std::string& key) {
  std::string s = p.get_string(key, std::string("linear"), activation_names());
  for (size_t i = 0; i < activation_names().size(); ++i)
    if (activation_names()[i] == s) return Activation(i);
  return Activation::Linear;
}

}  // namespace trainer
