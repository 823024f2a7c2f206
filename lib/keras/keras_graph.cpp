#include "keras/keras_graph.h"

namespace trainer {

namespace {

using json = KerasJson;

std::string layer_label(const KerasLayer& l) { return "layer '" + l.name + "' (" + l.class_name + ")"; }

/// Adds an input of layer: the output `tensor` of call `node` of the layer named `from`. tf.keras 2
/// writes a constant operand of an operation (1.0 in 1.0 - x) as ["_CONSTANT_VALUE", -1, 1.0].
void add_input(const json& from, const json& node, const json& tensor, KerasLayer& layer,
               std::vector<std::string>& problems) {
  const std::string name = from.get<std::string>();
  if (name == "_CONSTANT_VALUE") {
    if (layer.inputs.empty() && layer.constants.empty()) layer.tensor_first = false;
    layer.constants.push_back(tensor);
    return;
  }
  if (node != 0 || tensor != 0)
    problems.push_back(layer_label(layer) + ": reads output " + tensor.dump() + " of call " + node.dump() + " of '" +
                       name + "'; trainer models take each layer's one output of its one call");
  layer.inputs.push_back(name);
}

/// The tensors (keras_history [layer, node, tensor]) and constants of a Keras 3 call argument, in order.
void collect_keras3(const json& arg, KerasLayer& layer, std::vector<std::string>& problems) {
  if (arg.is_array()) {
    for (const json& a : arg) collect_keras3(a, layer, problems);
    return;
  }
  if (arg.is_object() && json_text(arg, "class_name") == "__keras_tensor__") {
    const json h = json_at(json_at(arg, "config"), "keras_history", json::array());
    if (!h.is_array() || h.size() != 3 || !h[0].is_string()) {
      problems.push_back(layer_label(layer) + ": an input without its layer's name (keras_history)");
      return;
    }
    add_input(h[0], h[1], h[2], layer, problems);
    return;
  }
  if (layer.inputs.empty() && layer.constants.empty()) layer.tensor_first = false;
  layer.constants.push_back(arg);
}

/// A call's keyword argument that changes what the layer computes: a problem. Keras 3 records
/// training=False for some calls in every functional model and overrides it with fit's and predict's
/// own, so there it says nothing; tf.keras 2 keeps an explicit training=False (a BatchNormalization
/// held in inference mode while fine-tuning).
void check_keyword(const KerasLayer& layer, const std::string& key, const json& value, bool keras3,
                   std::vector<std::string>& problems) {
  if (value.is_null() || key == "mask" || (keras3 && key == "training")) return;
  problems.push_back(layer_label(layer) + ": called with " + key + "=" + value.dump() + ", which trainer does not "
                     "pass to its layers" + (key == "training" ? " (a layer held in training or inference mode)" : "") +
                     "; call the layer without it, or freeze the layer with trainable=False, and import again");
}

/// A Keras 2 node: [[name, node_index, tensor_index, kwargs], ...]; kwargs may hold a TFOpLambda's constants.
void collect_keras2(const json& node, KerasLayer& layer, std::vector<std::string>& problems) {
  const json entries = node.is_array() && !node.empty() && node[0].is_string() ? json::array({node}) : node;
  for (const json& e : entries) {
    if (!e.is_array() || e.size() < 3 || !e[0].is_string()) {
      problems.push_back(layer_label(layer) + ": an inbound node that is not [name, node, tensor, kwargs]");
      continue;
    }
    add_input(e[0], e[1], e[2], layer, problems);
    if (e.size() > 3 && e[3].is_object())
      for (const auto& [key, value] : e[3].items()) {
        const bool tensor = value.is_array() && value.size() >= 3 && value[0].is_string();  // ["input_1", 0, 0]
        if (layer.class_name != "TFOpLambda") check_keyword(layer, key, value, false, problems);
        else if (tensor) add_input(value[0], value[1], value[2], layer, problems);
        else if (key != "name" && !value.is_null()) layer.constants.push_back(value);
      }
  }
}

KerasLayer read_layer(const json& entry, std::vector<std::string>& problems) {
  KerasLayer l;
  l.class_name = json_text(entry, "class_name");
  l.module = json_text(entry, "module");
  l.config = entry.contains("config") && entry["config"].is_object() ? entry["config"] : json::object();
  l.name = json_text(entry, "name");
  if (l.name.empty()) l.name = json_text(l.config, "name");
  const json nodes = json_at(entry, "inbound_nodes", json::array());
  if (!nodes.is_array()) return l;
  if (nodes.size() > 1)
    problems.push_back(layer_label(l) + ": called " + std::to_string(nodes.size()) +
                       " times (one layer's weights shared by several calls); trainer layers are called once: give "
                       "each call a layer of its own");
  if (nodes.empty()) return l;
  const json& node = nodes[0];
  if (node.is_object()) {  // Keras 3
    collect_keras3(json_at(node, "args", json::array()), l, problems);
    const json kwargs = json_at(node, "kwargs", json::object());
    if (kwargs.is_object())
      for (const auto& [key, value] : kwargs.items()) check_keyword(l, key, value, true, problems);
  } else {
    collect_keras2(node, l, problems);
  }
  return l;
}

/// The model's input or output layer names: [[name, 0, 0], ...] or Keras 3's [name, 0, 0] for one.
std::vector<std::string> endpoint_names(const json& list) {
  std::vector<std::string> names;
  if (!list.is_array()) return names;
  if (!list.empty() && list[0].is_string()) return {list[0].get<std::string>()};
  for (const json& e : list)
    if (e.is_array() && !e.empty() && e[0].is_string()) names.push_back(e[0].get<std::string>());
  return names;
}

void read_functional(const json& config, KerasGraph& g) {
  for (const json& entry : json_at(config, "layers", json::array())) g.layers.push_back(read_layer(entry, g.problems));
  const std::vector<std::string> ins = endpoint_names(json_at(config, "input_layers", json::array()));
  const std::vector<std::string> outs = endpoint_names(json_at(config, "output_layers", json::array()));
  if (ins.size() != 1)
    g.problems.push_back("the model has " + std::to_string(ins.size()) +
                         " inputs; trainer models take one image input [H, W, C]");
  if (outs.size() != 1)
    g.problems.push_back("the model has " + std::to_string(outs.size()) +
                         " outputs; trainer models have one output, the last layer");
  else if (!g.layers.empty() && g.layers.back().name != outs[0])
    g.problems.push_back("the model's output '" + outs[0] + "' is not its last layer ('" + g.layers.back().name +
                         "'); trainer's output is the last layer");
}

/// Keras 2 and layers built without an InputLayer keep the input shape in the first layer or the model.
json sequential_input_shape(const json& config, const json& first) {
  for (const char* key : {"batch_shape", "batch_input_shape"})
    if (first.is_object() && first.contains(key) && first[key].is_array()) return first[key];
  if (config.contains("build_input_shape") && config["build_input_shape"].is_array()) return config["build_input_shape"];
  return nullptr;
}

void read_sequential(const json& config, KerasGraph& g) {
  const json layers = json_at(config, "layers", json::array());
  for (size_t i = 0; i < layers.size(); ++i) {
    KerasLayer l = read_layer(layers[i], g.problems);
    if (i == 0 && l.class_name != "InputLayer") {
      const json shape = sequential_input_shape(config, l.config);
      if (shape.is_null()) {
        g.problems.push_back("the Sequential model has no input shape; add keras.Input((H, W, C)) as its first layer");
      } else {
        KerasLayer in;
        in.class_name = "InputLayer";
        in.name = "input";
        in.config = {{"batch_shape", shape}};
        g.layers.push_back(in);
      }
    }
    if (i > 0 || l.class_name != "InputLayer") l.inputs = {g.layers.empty() ? std::string() : g.layers.back().name};
    g.layers.push_back(std::move(l));
  }
}

}  // namespace

KerasGraph read_keras_graph(const json& model) {
  KerasGraph g;
  const std::string cls = json_text(model, "class_name");
  const json config = json_at(model, "config", json::object());
  g.sequential = cls == "Sequential";
  if (g.sequential) read_sequential(config, g);
  else if (cls == "Functional" || cls == "Model") read_functional(config, g);
  else g.problems.push_back("the model is a '" + cls + "', not a Functional or Sequential model; subclassed models "
                            "hold no layer graph to import: rebuild it with the functional API");
  for (const KerasLayer& l : g.layers)
    if (l.class_name == "Functional" || l.class_name == "Sequential" || l.class_name == "Model")
      g.problems.push_back(layer_label(l) + ": a model nested as a layer; trainer models are flat: call its layers "
                           "directly in the outer model");
  if (g.layers.empty() && g.problems.empty()) g.problems.push_back("the model has no layers");
  return g;
}

}  // namespace trainer
