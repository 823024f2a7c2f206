#pragma once
// The model as a graph for TensorBoard's Graphs tab (the TensorBoard
// callback's write_graph).
#include <string>

#include "config/config.h"
#include "nn/model.h"

namespace trainer {

/// A serialized GraphDef (lib/io/tensorboard_event.proto) of model, whose
/// layers config describes (the same layers, in order): one node per layer,
/// named as the layer, its op the layer's Keras type ("Conv2D"), its inputs
/// the layers feeding it (model.layer_inputs), and as attributes its output
/// shape ("_output_shapes": [-1, H, W, C], -1 for the batch, which the Graphs
/// tab writes on the edges), its weights' size ("params": floats) and each of
/// its config keys but type, name and inputs, as written in YAML's flow style
/// ("filters": "64", "kernel_size": "[3, 3]"). Keras writes TensorFlow's op
/// graph of its train function there; trainer has none, so the graph is of
/// layers, as Keras's model summary. Throws InternalError when config does
/// not describe model's layers.
std::string model_graph_def(const Model& model, const ModelConfig& config);

}  // namespace trainer
