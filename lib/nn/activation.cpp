#include "nn/activation.h"

#include <sstream>

#include "config/params.h"

namespace trainer {

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = {
      "linear", "relu",         "sigmoid",  "tanh",        "elu",  "selu",      "softplus", "leaky_relu",
      "relu6",  "hard_sigmoid", "softsign", "exponential", "gelu", "silu", "hard_silu", "mish"};
  return names;
}

namespace {

/// Keras 3's other names of two activations: swish (silu), hard_swish (hard_silu).
struct ActivationAlias {
  const char* alias;
  ActivationKind kind;
};
constexpr ActivationAlias kAliases[] = {{"swish", ActivationKind::Silu}, {"hard_swish", ActivationKind::HardSilu}};

}  // namespace

std::string activation_name(Activation a) {
  if (a.is(ActivationKind::ClippedRelu) && (a.beta != 6.f || a.alpha != 0.f)) {  // a ReLU layer's cap
    std::ostringstream s;
    s << "relu (max_value " << a.beta << (a.alpha != 0.f ? ", negative_slope " : "");
    if (a.alpha != 0.f) s << a.alpha;
    return s.str() + ")";
  }
  return activation_names()[size_t(a.kind)];
}

Activation activation_from_name(const std::string& name) {
  for (const ActivationAlias& a : kAliases)
    if (name == a.alias) return Activation{a.kind};
  for (size_t i = 0; i < activation_names().size(); ++i)
    if (activation_names()[i] == name) {
      const auto kind = ActivationKind(i);
      const float alpha = kind == ActivationKind::Elu ? 1.f : kind == ActivationKind::LeakyRelu ? 0.2f : 0.f;
      return Activation{kind, alpha, kind == ActivationKind::ClippedRelu ? 6.f : 0.f};  // relu6
    }
  return Activation{};
}

namespace {

/// Why a Keras activation trainer lacks is missing, and what to use; "" for
/// other names.
std::string missing_activation_hint(const std::string& s) {
  if (s == "None")
    return "is Python's None, which YAML writes as null: the same as linear, the default (no activation)";
  if (s == "log_softmax")
    return "is 'log_softmax', which is not supported; end the model with 'softmax' (the categorical losses "
           "take its logits) or with 'sigmoid' on a 1-filter output for binary masks";
  return "";
}

}  // namespace

OutputActivation strip_output_activation(Activation& activation, bool& softmax) {
  if (softmax) {
    softmax = false;
    return OutputActivation::Softmax;
  }
  if (!activation.is(ActivationKind::Sigmoid)) return OutputActivation::None;
  activation = Activation{};
  return OutputActivation::Sigmoid;
}

Activation read_activation(ParamReader& p, bool& softmax, const std::string& key) {
  std::vector<std::string> names = activation_names();
  for (const ActivationAlias& a : kAliases) names.push_back(a.alias);
  names.push_back("softmax");
  if (p.given(key)) {
    YAML::Node v = p.get_node(key);
    if (v.IsScalar()) {
      const std::string hint = missing_activation_hint(v.Scalar());
      if (!hint.empty()) p.fail(key, hint + ". Supported: " + join_names(names));
    }
  }
  // Keras's activation=None (null here) is linear, as is leaving the key out.
  const std::string name = p.given(key) ? p.get_string(key, std::nullopt, names) : std::string("linear");
  softmax = name == "softmax";
  return softmax ? Activation{} : activation_from_name(name);
}

}  // namespace trainer
