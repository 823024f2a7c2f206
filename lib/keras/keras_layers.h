#pragma once
// One Keras layer as one entry of a trainer config's model.layers: the same
// class name and arguments (the layers here take Keras's names and
// defaults), with what Keras's get_config() spells out but a config need not
// say left out (None, the defaults, the float32 dtype policy), initializers
// and regularizers as names and mappings, and preprocessing that Keras keeps
// as Python code (a Lambda, a tensor divided by 255 in the functional API)
// as a Rescaling layer where it is x * scale + offset.
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "keras/keras_graph.h"
#include "keras/keras_json.h"

namespace trainer {

/// A layer's config entry, or the reasons it has none.
struct LayerTranslation {
  YAML::Node node;                     ///< {type, name, <arguments>, inputs}; null when problems is not empty.
  std::vector<std::string> notes;      ///< What changed form, e.g. "layer 'lambda' (Lambda): x / 255 as Rescaling".
  std::vector<std::string> problems;   ///< What trainer cannot take, each with its fix.
};

/// Translates layer l; previous is the name of the layer before it in the
/// config (its input when `inputs` is left out). Problems: a layer type that
/// trainer lacks (keras_layer_hint's advice where there is one), a Lambda or
/// operation that is not affine, a dtype policy other than float32, an
/// input without a fixed size, an initializer trainer lacks. The argument
/// keys are checked against the layer by check_layer_keys.
LayerTranslation translate_layer(const KerasLayer& l, const std::string& previous);

/// The problems that building the layer of entry (a LayerTranslation's
/// node) finds in its arguments: unknown keys, values out of range, each as
/// "layer 'name' (Type): 'key' <what is wrong>". Empty when it builds.
std::vector<std::string> check_layer_keys(const YAML::Node& entry);

/// value as a YAML scalar or flow list: integers as written, floats in the
/// fewest digits that give the same float32 (when value is one: Keras 3
/// stores float32 variables as doubles, 0.0010000000474974513 for 1e-3) or
/// else the same double, strings, booleans; null for null and for objects.
YAML::Node yaml_value(const KerasJson& value);

/// node as one line of YAML in flow style: {type: Conv2D, name: c1, kernel_size: 3}.
std::string yaml_flow(const YAML::Node& node);

}  // namespace trainer
