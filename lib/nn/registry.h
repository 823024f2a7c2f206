#pragma once
// The layer registry: Keras type name -> factory. Built-ins are registered
// explicitly in registry.cpp (no static initialisers, which vanish when linked
// from a static library).
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/params.h"
#include "nn/layer.h"

namespace trainer {

/// Builds a layer from its YAML mapping. The reader has 'name', 'type' and
/// 'inputs' already consumed; the factory reads its own keys (Keras names and
/// defaults) and must leave none unread (the caller calls p.finish()).
using LayerFactory = std::unique_ptr<Layer> (*)(ParamReader& p, const std::string& name);

/// The factory for type, or nullptr.
LayerFactory find_layer_factory(const std::string& type);
/// All registered type names, in registration order.
std::vector<std::string> layer_types();
/// UserError at spec's type (a ParamReader of spec.node in file, what: its
/// place, e.g. "model.layers[3]") when no layer of that type is registered:
/// the message suggests the nearest known type, a Keras way to write it
/// (keras_layer_hint), and lists the known types.
void require_known_layer_type(const LayerSpec& spec, const std::string& file, const std::string& what);
/// require_known_layer_type for every layer of model (read from file), in
/// order: the first unknown type is the error.
void require_known_layer_types(const ModelConfig& model, const std::string& file);

// Factories of the built-in layers, one per file under nn/layers/.
std::unique_ptr<Layer> make_input(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_rescaling(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_conv2d(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_conv2d_transpose(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_max_pooling2d(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_average_pooling2d(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_global_average_pooling2d(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_global_max_pooling2d(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_depthwise_conv2d(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_separable_conv2d(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_dense(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_reshape(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_cropping2d(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_zero_padding2d(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_up_sampling2d(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_concatenate(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_add(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_multiply(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_activation(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_leaky_relu(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_elu(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_relu(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_softmax(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_prelu(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_batch_normalization(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_group_normalization(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_layer_normalization(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_dropout(ParamReader& p, const std::string& name);
std::unique_ptr<Layer> make_spatial_dropout2d(ParamReader& p, const std::string& name);

}  // namespace trainer
