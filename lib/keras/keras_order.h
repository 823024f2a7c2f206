#pragma once
// Where a .keras file keeps each layer's weights. Keras 3 does not use the
// layers' names there (they may be generated): model.weights.h5 holds
// /layers/<snake_case of the class>[_k]/vars, counted per class in
// model.layers order (keras/src/saving/saving_lib.py, _save_container_state),
// and a Functional model's layers are ordered as keras/src/ops/function.py's
// map_graph orders them.
#include <string>
#include <vector>

namespace trainer {

/// model.layers of a Functional model of one output: the layers on a path
/// to output, by decreasing depth (the longest path from the layer to the
/// output, in layers), ties by the order in which a depth-first walk from the
/// output, through each layer's inputs in call order, first reaches them.
/// inputs[i]: the indices of the layers that layer i reads.
std::vector<int> keras_layer_order(const std::vector<std::vector<int>>& inputs, int output);

/// The weights-file names of layers of the given Keras classes, in
/// model.layers order: snake_case of the class ("Conv2DTranspose" ->
/// "conv2d_transpose"), then _1, _2, ... for the next of the same class.
std::vector<std::string> keras_storage_names(const std::vector<std::string>& classes);

}  // namespace trainer
