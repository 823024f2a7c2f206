#include "keras/keras_graph.h"

namespace trainer {

namespace {

using json = KerasJson;

std::string str(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

std::string layer_label(const KerasLayer& l) { return "layer '" + l.name + "' (" + l.class_name + ")"; }

/// The tensors (keras_history [layer, node, tensor]) and constants of a Keras 3 call argument, in order.
void collect_keras3(const json& arg, KerasLayer& layer, std::vector<std::string>& problems) {
  if (arg.is_array()) {
    for (const json& a : arg) collect_keras3(a, layer, problems);
    return;
  }
  if (arg.is_object() && str(arg, "class_name") == "__keras_tensor__") {
    const json h = arg.value("config", json::object()).value("keras_history", json::array());
    if (!h.is_array() || h.size() != 3 || !h[0].is_string()) {
      problems.push_back(layer_label(layer) + ": an input without its layer's name (keras_history)");
      return;
    }
    if (h[1] != 0 || h[2] != 0)
      problems.push_back(layer_label(layer) + ": reads output " + h[2].dump() + " of call " + h[1].dump() + " of '" +
                         h[0].get<std::string>() + "'; trainer models take each layer's one output of its one call");
    layer.inputs.push_back(h[0].get<std::string>());
    return;
  }
  if (layer.inputs.empty() && layer.constants.empty()) layer.tensor_first = false;
  layer.constants.push_back(arg);
}

/// A Keras 2 node: [[name, node_index, tensor_index, kwargs], ...]; kwargs may hold a TFOpLambda's constants.
void collect_keras2(const json& node, KerasLayer& layer, std::vector<std::string>& problems) {
  const json entries = node.is_array() && !node.empty() && node[0].is_string() ? json::array({node}) : node;
  for (const json& e : entries) {
    if (!e.is_array() || e.size() < 3 || !e[0].is_string()) {
      problems.push_back(layer_label(layer) + ": an inbound node that is not [name, node, tensor, kwargs]");
      continue;
    }
    if (e[1] != 0 || e[2] != 0)
      problems.push_back(layer_label(layer) + ": reads output " + e[2].dump() + " of call " + e[1].dump() + " of '" +
                         e[0].get<std::string>() + "'; trainer models take each layer's one output of its one call");
    layer.inputs.push_back(e[0].get<std::string>());
    if (e.size() > 3 && e[3].is_object())
      for (const auto& [key, value] : e[3].items())
        if (key != "name" && !value.is_null()) layer.constants.push_back(value);
  }
}

KerasLayer read_layer(const json& entry, std::vector<std::string>& problems) {
  KerasLayer l;
  l.class_name = str(entry, "class_name");
  l.module = str(entry, "module");
  l.config = entry.contains("config") && entry["config"].is_object() ? entry["config"] : json::object();
  l.name = str(entry, "name");
  if (l.name.empty()) l.name = str(l.config, "name");
  const json nodes = entry.value("inbound_nodes", json::array());
  if (!nodes.is_array()) return l;
  if (nodes.size() > 1)
    problems.push_back(layer_label(l) + ": called " + std::to_string(nodes.size()) +
                       " times (one layer's weights shared by several calls); trainer layers are called once: give "
                       "each call a layer of its own");
  if (nodes.empty()) return l;
  const json& node = nodes[0];
  if (node.is_object()) {  // Keras 3
    collect_keras3(node.value("args", json::array()), l, problems);
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
  for (const json& entry : config.value("layers", json::array())) g.layers.push_back(read_layer(entry, g.problems));
  const std::vector<std::string> ins = endpoint_names(config.value("input_layers", json::array()));
  const std::vector<std::string> outs = endpoint_names(config.value("output_layers", json::array()));
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
  const json layers = config.value("layers", json::array());
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
  const std::string cls = str(model, "class_name");
  const json config = model.value("config", json::object());
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
