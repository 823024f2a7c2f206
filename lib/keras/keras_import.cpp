#include "keras/keras_import.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "config/config.h"
#include "core/error.h"
#include "keras/keras_compile.h"
#include "keras/keras_graph.h"
#include "keras/keras_layers.h"
#include "keras/keras_order.h"
#include "nn/model.h"

namespace trainer {

namespace {

/// The model section: each layer one flow mapping, its notes as comments above it.
std::string model_section(const std::string& name, const std::vector<LayerTranslation>& layers) {
  std::ostringstream out;
  out << "model:\n  name: " << yaml_flow(YAML::Node(name)) << "\n  layers:\n";
  for (const LayerTranslation& t : layers) {
    for (const std::string& note : t.notes) out << "    # " << note << "\n";
    out << "    - " << yaml_flow(t.node) << "\n";
  }
  return out.str();
}

/// The loss for a model that was never compiled: binary_crossentropy, or categorical_crossentropy after a
/// softmax (an activation or a Softmax layer).
std::string default_loss(const std::vector<LayerTranslation>& layers) {
  const YAML::Node last = layers.back().node;
  const bool softmax = last["type"].as<std::string>() == "Softmax" ||
                       (last["activation"] && last["activation"].as<std::string>() == "softmax");
  return softmax ? "categorical_crossentropy" : "binary_crossentropy";
}

std::string training_section(const CompileTranslation& c, const std::vector<LayerTranslation>& layers,
                             const ImportPaths& paths) {
  std::ostringstream out;
  out << "training:\n"
      << "  epochs: 10      # model.fit(epochs=...): set yours\n"
      << "  batch_size: 32  # model.fit(batch_size=...), Keras's default: the global batch, split over the towers\n";
  bool has_loss = false;
  for (const std::string& line : c.lines) has_loss |= line.rfind("loss:", 0) == 0;
  if (!has_loss) out << "  loss: " << default_loss(layers) << "  # the model was not compiled: choose its loss\n";
  for (const std::string& note : c.notes) out << "  # " << note << "\n";  // what the import changed
  for (const std::string& line : c.lines) out << "  " << line << "\n";
  if (!paths.weights.empty())
    out << "  # The weights the Keras file holds; remove this line to train from the initializers.\n"
        << "  initial_weights: " << yaml_flow(YAML::Node(std::filesystem::absolute(paths.weights).string()))
        << "\n";
  return out.str();
}

std::string config_text(const KerasModelFile& file, const ImportPaths& paths, const std::string& model_name,
                        const std::vector<LayerTranslation>& layers, const CompileTranslation& compile) {
  std::ostringstream out;
  out << "# Imported by `trainer import` from " << paths.source << " (" << keras_format_name(file.format)
      << (file.keras_version.empty() ? "" : ", Keras " + file.keras_version) << ").\n"
      << "# The model is the Keras model's, layer by layer with its names; training takes its compile()\n"
      << "# arguments. Fill in the data folders and model.fit's epochs and batch size (docs/config.md).\n\n"
      << model_section(model_name, layers) << "\n"
      << "data:\n"
      << "  # The image folder and the mask folder (or --images and --masks). The mask of 0a1b.png is\n"
      << "  # 0a1b<mask_suffix>.png: 0a1b_mask.png here; mask_suffix: \"\" for masks named as their images.\n"
      << "  images: images\n  masks: masks\n  mask_suffix: _mask\n"
      << "  validation_split: 0.1  # model.fit(validation_split=...): the last 10% of the pairs by name\n\n"
      << training_section(compile, layers, paths);
  return out.str();
}

/// One layer's weights from the file: want's names and shapes, in want's order.
void match_layer(const KerasLayerWeights& w, const std::vector<ParamSpec>& want, std::vector<WeightRecord>& out,
                 std::vector<std::string>& problems) {
  if (w.arrays.size() != want.size()) {
    problems.push_back("layer '" + w.layer + "': the file holds " + std::to_string(w.arrays.size()) +
                       " weights, the layer has " + std::to_string(want.size()));
    return;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    size_t k = i;  // .keras: by order; .h5: by name
    if (!w.names.empty()) {
      k = size_t(std::find(w.names.begin(), w.names.end(), want[i].name) - w.names.begin());
      if (k == w.names.size() && want[i].name == "depthwise_kernel")  // Keras 3's DepthwiseConv2D calls it kernel
        k = size_t(std::find(w.names.begin(), w.names.end(), "kernel") - w.names.begin());
      if (k == w.names.size()) {
        problems.push_back("layer '" + w.layer + "': the file has no weight '" + want[i].name + "'");
        continue;
      }
    }
    if (w.arrays[k].shape != want[i].shape) {
      problems.push_back("layer '" + w.layer + "': weight '" + want[i].name + "' is " + shape_text(w.arrays[k].shape) +
                         " in the file, " + shape_text(want[i].shape) + " in the model");
      continue;
    }
    out.push_back({w.layer, want[i].name, want[i].shape, w.arrays[k].values});
  }
}

/// The file's weights under the model's names and shapes, in the model's order; problems for what does not fit.
std::vector<WeightRecord> match_weights(const std::vector<KerasLayerWeights>& weights, const Model& model,
                                        std::vector<std::string>& problems) {
  std::vector<std::pair<std::string, std::vector<ParamSpec>>> specs;  // per layer with weights, model order
  for (const WeightSlot& s : model.weights()) {
    const std::string& layer = model.layer(s.layer).name();
    if (specs.empty() || specs.back().first != layer) specs.push_back({layer, {}});
    specs.back().second.push_back(s.spec);
  }
  std::map<std::string, const KerasLayerWeights*> in_file;
  for (const KerasLayerWeights& w : weights) in_file[w.layer] = &w;
  std::vector<WeightRecord> out;
  for (const auto& [layer, want] : specs) {
    const auto it = in_file.find(layer);
    if (it == in_file.end()) {
      problems.push_back("layer '" + layer + "' has weights in the model but none in the file; the file's weights "
                         "do not belong to its model");
      continue;
    }
    match_layer(*it->second, want, out, problems);
    in_file.erase(it);
  }
  for (const auto& [layer, w] : in_file)
    problems.push_back("the file holds weights for '" + layer + "', which is no layer with weights in the model");
  return out;
}

/// A .keras file's weights under their layers' names: the file names them by class and place in
/// model.layers (keras_storage_names); functional-API operations (Keras 3's ops) are no layers there.
std::vector<KerasLayerWeights> by_layer_name(const KerasGraph& g, std::vector<KerasLayerWeights> weights) {
  std::map<std::string, int> index;
  for (size_t i = 0; i < g.layers.size(); ++i) index[g.layers[i].name] = int(i);
  std::vector<int> order(g.layers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  if (!g.sequential) {
    std::vector<std::vector<int>> inputs(g.layers.size());
    for (size_t i = 0; i < g.layers.size(); ++i)
      for (const std::string& in : g.layers[i].inputs)
        if (index.count(in)) inputs[i].push_back(index[in]);
    order = keras_layer_order(inputs, int(g.layers.size()) - 1);
  }
  std::vector<std::string> classes, names;
  for (int i : order) {
    const KerasLayer& l = g.layers[size_t(i)];
    if (l.module.rfind("keras.src.ops", 0) == 0) continue;
    classes.push_back(l.class_name);
    names.push_back(l.name);
  }
  const std::vector<std::string> stored = keras_storage_names(classes);
  std::map<std::string, std::string> layer_of;
  for (size_t i = 0; i < stored.size(); ++i) layer_of[stored[i]] = names[i];
  for (KerasLayerWeights& w : weights)
    if (const auto it = layer_of.find(w.layer); it != layer_of.end()) w.layer = it->second;
  return weights;
}

ImportedModel translate_model(const KerasModelFile& file, const ImportPaths& paths) {
  ImportedModel r;
  const KerasGraph graph = read_keras_graph(file.model);
  r.problems = graph.problems;
  // Keras 1 and 2's hard_sigmoid is clip(0.2 x + 0.5, 0, 1); Keras 3's, trainer's, is relu6(x + 3) / 6.
  const bool keras2 = file.keras_version.rfind("2.", 0) == 0 || file.keras_version.rfind("1.", 0) == 0;
  std::vector<LayerTranslation> layers;
  for (const KerasLayer& l : graph.layers) {
    LayerTranslation t = translate_layer(l, layers.empty() ? std::string() : graph.layers[layers.size() - 1].name);
    if (t.problems.empty()) t.problems = check_layer_keys(t.node);
    if (keras2 && t.node["activation"] && t.node["activation"].as<std::string>() == "hard_sigmoid")
      t.problems.push_back("layer '" + l.name + "' (" + l.class_name + "): Keras " + file.keras_version +
                           "'s hard_sigmoid is clip(0.2 x + 0.5, 0, 1), trainer's (Keras 3's) relu6(x + 3) / 6; "
                           "choose another activation, e.g. sigmoid, and import again");
    r.notes.insert(r.notes.end(), t.notes.begin(), t.notes.end());
    r.problems.insert(r.problems.end(), t.problems.begin(), t.problems.end());
    layers.push_back(std::move(t));
  }
  const CompileTranslation compile = translate_compile(file.compile);
  r.notes.insert(r.notes.end(), compile.notes.begin(), compile.notes.end());
  r.problems.insert(r.problems.end(), compile.problems.begin(), compile.problems.end());
  if (!r.problems.empty()) return r;

  const KerasJson name = json_at(json_at(file.model, "config"), "name", KerasJson("model"));
  const ImportPaths kept = file.weights.empty() ? ImportPaths{paths.source, paths.config, ""} : paths;
  const std::string text =
      config_text(file, kept, name.is_string() ? name.get<std::string>() : "model", layers, compile);
  try {
    const Config config = parse_config(text, paths.config);
    const Model model(config.model, paths.config);
    if (!file.weights.empty())
      r.weights = match_weights(file.format == KerasFormat::Keras ? by_layer_name(graph, file.weights) : file.weights,
                                model, r.problems);
  } catch (const UserError& e) {
    r.problems.push_back(e.what());
  }
  if (r.problems.empty()) r.yaml = text;
  else r.weights.clear();
  return r;
}

}  // namespace

ImportedModel import_keras_model(const KerasModelFile& file, const ImportPaths& paths) {
  try {
    return translate_model(file, paths);
  } catch (const KerasJson::exception& e) {  // a value of another JSON type than Keras writes there
    ImportedModel r;
    r.problems.push_back(std::string("the model's config is not as Keras writes it (") + e.what() +
                         "); save the model again with Keras and import that file");
    return r;
  }
}

}  // namespace trainer
