#pragma once
// The layers of a Keras model config in order, each with the names of the
// layers it reads: Functional models (Keras 3's inbound_nodes of
// {"args": [...], "kwargs": {...}} with __keras_tensor__ entries, and Keras
// 2's [[name, node, tensor, kwargs], ...]) and Sequential ones.
#include <string>
#include <vector>

#include "keras/keras_json.h"

namespace trainer {

/// One layer (or functional-API operation, e.g. Keras 3's TrueDivide of a
/// tensor by 255) of a Keras model.
struct KerasLayer {
  std::string class_name;  ///< "Conv2D", "InputLayer", "TrueDivide", "TFOpLambda", ...
  std::string module;      ///< "keras.layers", "keras.src.ops.numpy", ...; "" when not stored.
  std::string name;
  KerasJson config;   ///< Its get_config() (an object).
  std::vector<std::string> inputs;  ///< The layers whose outputs it reads, in call order.
  /// The call's arguments that are not tensors, in order: an operation's
  /// constant (255 in x / 255; a TFOpLambda's "y").
  std::vector<KerasJson> constants;
  /// Whether a tensor argument came before the first constant (x / 255 rather than 255 / x).
  bool tensor_first = true;
};

/// A Keras model's layers in config order, and the problems that keep it
/// from being one trainer model: not one input and one output, a layer
/// called more than once (shared weights), a layer reading the second output
/// of another, a model nested as a layer, a Sequential model without an input
/// shape. Each problem names its layer.
struct KerasGraph {
  bool sequential = false;  ///< A Sequential model (model.layers in list order); else Functional.
  std::vector<KerasLayer> layers;
  std::vector<std::string> problems;
};

/// Reads model ({"class_name": ..., "config": ...} as in KerasModelFile).
/// Never throws for unexpected JSON: what cannot be read becomes a problem.
KerasGraph read_keras_graph(const KerasJson& model);

}  // namespace trainer
