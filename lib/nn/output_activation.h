#pragma once
// OutputActivation: what a model's last layer ends in that a loss takes over
// (Layer::strip_output_activation).

namespace trainer {

/// The activation a model's last layer ends in that a loss can take over.
enum class OutputActivation {
  None,     ///< Neither: the output is what the layer computes.
  Sigmoid,  ///< sigmoid, taken over by the binary losses.
  Softmax,  ///< softmax over the channels, taken over by the categorical losses.
};

}  // namespace trainer
