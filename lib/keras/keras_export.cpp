#include "keras/keras_export.h"

#include <yaml-cpp/yaml.h>
#include <zip.h>

#include <ctime>
#include <map>
#include <memory>

#include "core/build_id.h"
#include "core/error.h"
#include "io/hdf5_util.h"
#include "keras/keras_order.h"
#include "nn/layer.h"

namespace trainer {

namespace {

using json = KerasJson;

/// A YAML scalar as JSON, read as the config reader reads it (yaml-cpp's conversions): an integer, a
/// float, a boolean (true, yes, on, y, ... as YAML 1.1 has them), or else text.
json scalar_json(const YAML::Node& n) {
  long long i = 0;
  double d = 0;
  bool b = false;
  if (YAML::convert<long long>::decode(n, i)) return i;
  if (YAML::convert<double>::decode(n, d)) return d;
  if (YAML::convert<bool>::decode(n, b)) return b;
  return n.Scalar();
}

/// A config value as Keras's JSON: lists as lists; a mapping {type: L2, l2: ...} as the serialized
/// object {"class_name": "L2", "config": {"l2": ...}}, as Keras's deserializers take it.
json yaml_json(const YAML::Node& n) {
  if (n.IsNull()) return nullptr;
  if (n.IsScalar()) return scalar_json(n);
  if (n.IsSequence()) {
    json a = json::array();
    for (const auto& v : n) a.push_back(yaml_json(v));
    return a;
  }
  if (n.IsMap()) {
    json config = json::object();
    std::string type;
    for (const auto& kv : n) {
      const std::string key = kv.first.as<std::string>();
      if (key == "type") type = kv.second.as<std::string>();
      else config[key] = yaml_json(kv.second);
    }
    return type.empty() ? config : json{{"class_name", type}, {"config", config}};
  }
  return nullptr;
}

json keras_tensor(const std::string& layer, const Shape& s) {
  return {{"class_name", "__keras_tensor__"},
          {"config", {{"shape", {nullptr, s.h, s.w, s.c}}, {"dtype", "float32"}, {"keras_history", {layer, 0, 0}}}}};
}

json layer_entry(const std::string& cls, const std::string& name, json config, json args) {
  config["name"] = name;
  json nodes = json::array();
  if (!args.is_null()) nodes.push_back({{"args", args}, {"kwargs", json::object()}});
  return {{"module", "keras.layers"}, {"class_name", cls}, {"config", config}, {"registered_name", nullptr},
          {"name", name}, {"inbound_nodes", nodes}};
}

/// The call arguments of layer i: its one input tensor, or the list of them (Concatenate, Add, Multiply).
json call_args(const Model& model, int i) {
  json tensors = json::array();
  for (int j : model.layer_inputs(i)) tensors.push_back(keras_tensor(model.layer(j).name(), model.layer_output_shape(j)));
  return tensors.size() == 1 ? tensors : json::array({tensors});
}

json layer_config(const LayerSpec& spec) {
  json config = json::object();
  if (spec.type == "Rescaling") config["offset"] = 0.0;  // Keras's Rescaling.from_config reads it unconditionally
  for (const auto& kv : spec.node) {
    const std::string key = kv.first.as<std::string>();
    if (key != "type" && key != "name" && key != "inputs" && key != "trainable") config[key] = yaml_json(kv.second);
  }
  // Only when false: some Keras layers (SpatialDropout2D) take no trainable argument.
  if (!spec.trainable) config["trainable"] = false;
  config["dtype"] = "float32";
  return config;
}

}  // namespace

KerasJson keras_model_config(const ModelConfig& config, const Model& model, OutputActivation append) {
  if (int(config.layers.size()) != model.num_layers()) throw InternalError("keras export: config and model differ");
  json layers = json::array();
  const Shape in = model.input_shape();
  const std::string input = config.layers[0].name;
  layers.push_back(layer_entry("InputLayer", input,
                               {{"batch_shape", {nullptr, in.h, in.w, in.c}}, {"dtype", "float32"}}, nullptr));
  for (int i = 1; i < model.num_layers(); ++i) {
    const LayerSpec& spec = config.layers[size_t(i)];
    layers.push_back(layer_entry(spec.type, spec.name, layer_config(spec), call_args(model, i)));
  }
  std::string output = config.layers.back().name;
  if (append != OutputActivation::None) {
    std::string name = "probability";
    const auto taken = [&](const std::string& n) {
      for (const LayerSpec& s : config.layers)
        if (s.name == n) return true;
      return false;
    };
    for (int k = 1; taken(name); ++k) name = "probability_" + std::to_string(k);
    // json::array: a braced list of one json is a copy of it under clang (CWG 1467), an array under gcc.
    const json args = json::array({keras_tensor(output, model.output_shape())});
    layers.push_back(layer_entry("Activation", name,
                                 {{"activation", append == OutputActivation::Sigmoid ? "sigmoid" : "softmax"},
                                  {"trainable", true}, {"dtype", "float32"}},
                                 args));
    output = name;
  }
  return {{"module", "keras.src.models.functional"}, {"class_name", "Functional"},
          {"config", {{"name", config.name}, {"trainable", true}, {"layers", layers},
                      {"input_layers", {{input, 0, 0}}}, {"output_layers", {{output, 0, 0}}}}},
          {"registered_name", "Functional"}, {"build_config", {{"input_shape", nullptr}}}};
}

namespace {

/// The weights-file names (keras_order.h) of the model's layers, and of an appended layer of class extra.
std::vector<std::string> storage_names(const ModelConfig& config, const Model& model, const std::string& extra) {
  const int n = model.num_layers();
  std::vector<std::vector<int>> inputs(size_t(n) + (extra.empty() ? 0 : 1));
  for (int i = 1; i < n; ++i) inputs[size_t(i)] = model.layer_inputs(i);
  if (!extra.empty()) inputs[size_t(n)] = {n - 1};
  std::vector<std::string> classes;
  const std::vector<int> order = keras_layer_order(inputs, int(inputs.size()) - 1);
  for (int i : order) classes.push_back(i == 0 ? "InputLayer" : i < n ? config.layers[size_t(i)].type : extra);
  const std::vector<std::string> stored = keras_storage_names(classes);
  std::vector<std::string> names(inputs.size());
  for (size_t k = 0; k < order.size(); ++k) names[size_t(order[k])] = stored[k];
  return names;
}

/// model.weights.h5 in memory: /layers/<storage name>/vars/<i> for every layer (empty for those without
/// weights), in each layer's variable order (its param_specs, Keras's), and an empty /vars for the model.
std::string weights_image(const ModelConfig& config, const Model& model, const std::vector<WeightRecord>& weights,
                          const std::string& extra) {
  const std::vector<std::string> stored = storage_names(config, model, extra);
  std::map<std::pair<std::string, std::string>, const WeightRecord*> by_name;
  for (const WeightRecord& w : weights) by_name[{w.layer, w.name}] = &w;
  std::map<int, std::vector<const ParamSpec*>> specs;
  for (const WeightSlot& s : model.weights()) specs[s.layer].push_back(&s.spec);
  h5::QuietErrors quiet;
  h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access list");
  if (H5Pset_fapl_core(fapl, 1 << 20, 0) < 0) h5::fail("core driver");
  h5::Handle file(H5Fcreate("model.weights.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl), H5Fclose, "creating the weights");
  h5::Handle layers(H5Gcreate2(file, "layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "/layers");
  const auto add_layer = [&](const std::string& name, const std::string& group_name,
                             const std::vector<const ParamSpec*>& want) {
    h5::Handle group(H5Gcreate2(layers, group_name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                     group_name);
    h5::Handle vars(H5Gcreate2(group, "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, name + "/vars");
    for (size_t k = 0; k < want.size(); ++k) {
      const auto it = by_name.find({name, want[k]->name});
      if (it == by_name.end()) throw InternalError("keras export: no weight '" + name + "/" + want[k]->name + "'");
      std::vector<hsize_t> dims(it->second->shape.begin(), it->second->shape.end());
      h5::write_float_dataset(vars, std::to_string(k), dims, it->second->values.data(), name + "/" + want[k]->name);
    }
  };
  for (int i = 0; i < model.num_layers(); ++i) add_layer(model.layer(i).name(), stored[size_t(i)], specs[i]);
  if (!extra.empty()) add_layer(extra, stored.back(), {});
  h5::Handle vars(H5Gcreate2(file, "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "/vars");
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) h5::fail("flushing the weights");
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  if (size < 0) h5::fail("the weights' image");
  std::string image(size_t(size), '\0');
  if (H5Fget_file_image(file, image.data(), image.size()) < 0) h5::fail("the weights' image");
  return image;
}

/// A zip of the entries (name, bytes), stored uncompressed as Keras writes .keras files.
std::string zip_bytes(const std::vector<std::pair<std::string, std::string>>& entries) {
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &err);
  if (!buffer) throw InternalError("keras export: a zip buffer: " + std::string(zip_error_strerror(&err)));
  std::unique_ptr<zip_source_t, void (*)(zip_source_t*)> keep(buffer, zip_source_free);
  zip_t* z = zip_open_from_source(buffer, ZIP_TRUNCATE, &err);
  if (!z) throw InternalError("keras export: a zip: " + std::string(zip_error_strerror(&err)));
  zip_source_keep(buffer);  // the zip's reference goes at zip_close; ours reads the bytes after
  for (const auto& [name, bytes] : entries) {
    zip_source_t* s = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    const zip_int64_t index = s ? zip_file_add(z, name.c_str(), s, ZIP_FL_ENC_UTF_8) : -1;
    if (index < 0 || zip_set_file_compression(z, zip_uint64_t(index), ZIP_CM_STORE, 0) < 0) {
      const std::string reason = zip_strerror(z);
      if (s && index < 0) zip_source_free(s);
      zip_discard(z);
      throw InternalError("keras export: adding " + name + " to the zip: " + reason);
    }
  }
  if (zip_close(z) < 0) {
    const std::string reason = zip_strerror(z);
    zip_discard(z);
    throw InternalError("keras export: writing the zip: " + reason);
  }
  zip_stat_t st;
  std::string out;
  if (zip_source_stat(buffer, &st) < 0 || zip_source_open(buffer) < 0)
    throw InternalError("keras export: reading the zip back");
  out.resize(size_t(st.size));
  const zip_int64_t got = zip_source_read(buffer, out.data(), st.size);
  zip_source_close(buffer);
  if (got != zip_int64_t(st.size)) throw InternalError("keras export: reading the zip back");
  return out;
}

std::string metadata_json() {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", &utc);
  return json{{"keras_version", "3.0.0"}, {"date_saved", date}, {"trainer_version", build_id()}}.dump();
}

}  // namespace

std::string keras_file_bytes(const ModelConfig& config, const Model& model, const std::vector<WeightRecord>& weights,
                             OutputActivation append) {
  const json model_config = keras_model_config(config, model, append);
  const json& layers = model_config["config"]["layers"];
  const std::string extra = append == OutputActivation::None ? "" : layers.back()["class_name"].get<std::string>();
  try {
    return zip_bytes({{"metadata.json", metadata_json()},
                      {"config.json", model_config.dump()},
                      {"model.weights.h5", weights_image(config, model, weights, extra)}});
  } catch (const h5::H5Failure& e) {
    throw InternalError(std::string("keras export: HDF5 in memory: ") + e.what());
  }
}

}  // namespace trainer
