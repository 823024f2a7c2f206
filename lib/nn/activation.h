#pragma once
// Element-wise activations shared by Activation, Conv2D and Conv2DTranspose.
// Keras names: "linear" (identity), "relu" (max(0, x)), "sigmoid" (1/(1+e^-x)).
// The enum and the math live in the backend (backend/elementwise_ops.h:
// activation_forward / activation_backward, per element in
// backend/elementwise_math.h); this header adds the Keras names.
#include "backend/elementwise_ops.h"
#include <cstddef>
#include <string>
#include <vector>

namespace trainer {

class ParamReader;

/// The Keras names accepted in a config, in the order of the enum.
const std::vector<std::string>& activation_names();
std::string activation_name(Activation a);
/// Reads key (default "linear") from p; UserError naming the place otherwise.
Activation read_activation(ParamReader& p, const std::string& key = "activation");

}  // namespace trainer
