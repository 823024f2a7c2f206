#pragma once
// Element-wise activations shared by Activation, LeakyReLU, ELU, ReLU, Conv2D
// and Conv2DTranspose. Keras names (keras.activations): "linear" (identity),
// "relu", "sigmoid", "tanh", "elu" (alpha 1), "selu", "softplus",
// "leaky_relu" (negative slope 0.2, as Keras 3's function), "relu6",
// "hard_sigmoid" (Keras 3's), "softsign", "exponential", "gelu" (exact, as
// Keras's approximate=False), "silu" (alias "swish"), "hard_silu" (alias
// "hard_swish") and "mish", and "softmax" on the last layer (not
// element-wise, so not an ActivationKind). The kinds and
// the math live in the backend (backend/elementwise_ops.h:
// activation_forward / activation_backward, per element in
// backend/elementwise_math.h); this header adds the Keras names.
#include "backend/elementwise_ops.h"
#include "nn/output_activation.h"
#include <cstddef>
#include <string>
#include <vector>

namespace trainer {

class ParamReader;

/// The Keras names accepted in a config, in the order of ActivationKind.
const std::vector<std::string>& activation_names();
/// The Keras name of a's kind ("relu (max_value m, ...)" for a ReLU layer's
/// cap other than relu6's).
std::string activation_name(Activation a);
/// The activation of a Keras name or alias (swish, hard_swish) with Keras's
/// default parameter (elu: alpha 1; leaky_relu: negative slope 0.2; relu6:
/// cap 6); linear for an unknown name.
Activation activation_from_name(const std::string& name);
/// Reads key (default "linear") from p; UserError naming the place otherwise,
/// with a hint for log_softmax, which trainer lacks.
/// "softmax" (keras.activations.softmax over the channels, the last axis)
/// sets softmax and returns linear; only a model's last layer may have it
/// (Model refuses it elsewhere), and the categorical losses take the logits
/// before it.
Activation read_activation(ParamReader& p, bool& softmax, const std::string& key = "activation");

/// A last layer's Layer::strip_output_activation on its activation and
/// softmax flag: clears the softmax (returning Softmax), else turns a sigmoid
/// into linear (returning Sigmoid); None and no change otherwise.
OutputActivation strip_output_activation(Activation& activation, bool& softmax);

}  // namespace trainer
