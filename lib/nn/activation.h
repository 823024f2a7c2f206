#pragma once
// Element-wise activations shared by Activation, Conv2D and Conv2DTranspose.
// Keras names: "linear" (identity), "relu" (max(0, x)), "sigmoid" (1/(1+e^-x)).
// The math is written once as inline functions usable from CUDA kernels later.
#include "core/math.h"
#include <cstddef>
#include <string>
#include <vector>

namespace trainer {

class ParamReader;

/// The activations of Keras's `activation` argument that trainer supports.
enum class Activation { Linear, Relu, Sigmoid };

/// The Keras names accepted in a config, in the order of the enum.
const std::vector<std::string>& activation_names();
std::string activation_name(Activation a);
/// Reads key (default "linear") from p; UserError naming the place otherwise.
Activation read_activation(ParamReader& p, const std::string& key = "activation");

/// In place: y[i] <- f(y[i]) for n elements.
void activation_forward(Activation a, float* y, size_t n);
/// In place: dy[i] <- dy[i] * f'(x[i]), with f' written in terms of the output
/// y = f(x): relu' = (y > 0), sigmoid' = y (1 - y).
void activation_backward(Activation a, const float* y, float* dy, size_t n);

}  // namespace trainer
