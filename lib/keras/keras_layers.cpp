#include "keras/keras_layers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "config/config.h"
#include "config/params.h"
#include "config/sections.h"
#include "core/error.h"
#include "keras/python_lambda.h"
#include "nn/initializers.h"
#include "nn/registry.h"

namespace trainer {

namespace {

using json = KerasJson;

std::string label(const KerasLayer& l) { return "layer '" + l.name + "' (" + l.class_name + ")"; }

/// Keras's default of key, where a config need not state it: {class ("*" for any layer that has the key), key, value}.
struct KerasDefault {
  const char* cls;
  const char* key;
  json value;
};

const std::vector<KerasDefault>& keras_defaults() {
  static const std::vector<KerasDefault> table = {
      {"*", "padding", "valid"}, {"*", "data_format", "channels_last"}, {"*", "dilation_rate", {1, 1}},
      {"*", "activation", "linear"}, {"*", "use_bias", true}, {"*", "axis", -1}, {"*", "epsilon", 1e-3},
      {"*", "center", true}, {"*", "scale", true}, {"*", "synchronized", false}, {"*", "keepdims", false},
      {"*", "depth_multiplier", 1}, {"*", "interpolation", "nearest"}, {"*", "renorm", false},
      {"*", "renorm_momentum", 0.99}, {"*", "kernel_initializer", "glorot_uniform"},
      {"*", "bias_initializer", "zeros"}, {"*", "beta_initializer", "zeros"}, {"*", "gamma_initializer", "ones"},
      {"*", "moving_mean_initializer", "zeros"}, {"*", "moving_variance_initializer", "ones"},
      {"*", "depthwise_initializer", "glorot_uniform"}, {"*", "pointwise_initializer", "glorot_uniform"},
      {"Conv2D", "strides", {1, 1}}, {"Conv2DTranspose", "strides", {1, 1}}, {"DepthwiseConv2D", "strides", {1, 1}},
      {"SeparableConv2D", "strides", {1, 1}}, {"Conv2D", "groups", 1}, {"Conv2DTranspose", "groups", 1}, {"BatchNormalization", "momentum", 0.99},
      {"UpSampling2D", "size", {2, 2}}, {"Rescaling", "offset", 0.0}, {"LeakyReLU", "negative_slope", 0.3},
      {"LeakyReLU", "alpha", 0.3}, {"ELU", "alpha", 1.0}, {"PReLU", "alpha_initializer", "zeros"},
      {"LayerNormalization", "rms_scaling", false}, {"ReLU", "negative_slope", 0.0}, {"ReLU", "threshold", 0.0},
  };
  return table;
}

bool same_value(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (!same_value(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

bool is_default(const std::string& cls, const std::string& key, const json& value) {
  for (const KerasDefault& d : keras_defaults())
    if ((std::string(d.cls) == "*" || d.cls == cls) && d.key == key && same_value(d.value, value)) return true;
  return false;
}

/// An initializer ("he_normal" or {"class_name": "HeNormal", "config": {"seed": null}}) as one of
/// initializer_names(); "" with a problem when trainer lacks it. A seed is dropped with a note.
std::string initializer_name(const json& v, const std::string& where, LayerTranslation& t) {
  std::string name = v.is_string() ? v.get<std::string>() : keras_snake_case(json_text(v, "class_name"));
  if (name == "zeros" || name == "zero") name = "zeros";
  const auto& known = initializer_names();
  if (std::find(known.begin(), known.end(), name) == known.end()) {
    t.problems.push_back(where + " is " + (v.is_string() ? name : json_text(v, "class_name")) +
                         ", which trainer lacks; use one of " + join_names(known) +
                         " (imported weights replace it anyway; it only starts a model trained from scratch)");
    return "";
  }
  const json config = v.is_object() ? json_at(v, "config", json::object()) : json::object();
  for (const auto& [key, value] : config.items()) {
    if (value.is_null()) continue;
    if (key == "seed") t.notes.push_back(where + ": its seed " + value.dump() + " is dropped (training.seed seeds every "
                                         "initializer)");
    else t.problems.push_back(where + ": " + name + "'s argument " + key + "=" + value.dump() + " is not supported; "
                              "use " + name + " with Keras's defaults");
  }
  return name;
}

/// A regularizer {"class_name": "L2", "config": {"l2": 0.01}} as {type: L2, l2: 0.01}; other objects
/// {"class_name": C, "config": {...}} as {type: C, ...} (the layer then says what it makes of them).
YAML::Node class_object(const json& v) {
  YAML::Node m(YAML::NodeType::Map);
  m["type"] = json_text(v, "class_name");
  const json config = json_at(v, "config", json::object());
  for (const auto& [key, value] : config.items())
    if (!value.is_null()) m[key] = yaml_value(value);
  return m;
}

std::string shortest(double v) {
  char buf[40];
  const bool single = double(float(v)) == v;
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    const double back = std::strtod(buf, nullptr);
    if (single ? float(back) == float(v) : back == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // stays a float in YAML
  return s;
}

/// Keras's int-or-tuple arguments, written as one number when every entry is the same.
bool is_size_key(const std::string& key) {
  return key == "kernel_size" || key == "strides" || key == "pool_size" || key == "dilation_rate" || key == "size" ||
         key == "padding" || key == "cropping";
}

/// [a, a] or [[a, a], [a, a]] as a; else value.
json compact(const json& value) {
  if (!value.is_array() || value.empty()) return value;
  const json first = compact(value[0]);
  if (first.is_array()) return value;
  for (const json& v : value)
    if (compact(v) != first) return value;
  return first;
}

/// The dtype policy: float32 (a string or a DTypePolicy object) says nothing; others are problems.
void check_dtype(const KerasLayer& l, const json& v, LayerTranslation& t) {
  const std::string name = v.is_string() ? v.get<std::string>() : json_text(json_at(v, "config", json::object()), "name");
  if (v.is_null() || name == "float32") return;
  t.problems.push_back(label(l) + ": dtype policy '" + name + "'; trainer sets the arithmetic for the whole run "
                       "(training.precision: fp32, tf32 or bf16): remove the layer's dtype or use float32");
}

/// The arguments of l's config as keys of node (name, trainable and dtype apart).
void translate_arguments(const KerasLayer& l, const std::string& type, YAML::Node& node, LayerTranslation& t) {
  const bool pooling = type.find("Pooling2D") != std::string::npos;
  for (const auto& [key, given] : l.config.items()) {
    json value = given;
    // Keras 2 keeps BatchNormalization's axis as a list ([3]); 3 is the channels of [N, H, W, C], as -1.
    if (key == "axis" && value.is_array() && value.size() == 1) value = value[0];
    if (key == "axis" && value == 3) value = -1;
    // batch_input_shape: the input of a Sequential model's first layer, its Input entry (read_keras_graph).
    if (key == "name" || key == "batch_input_shape" || key == "batch_shape" || value.is_null() ||
        is_default(type, key, value))
      continue;
    if (key == "trainable") {
      if (value == false) node["trainable"] = false;
      continue;
    }
    if (key == "dtype") {
      check_dtype(l, value, t);
      continue;
    }
    if (pooling && key == "strides" && same_value(value, json_at(l.config, "pool_size", json()))) continue;
    if (key.size() > 12 && key.compare(key.size() - 12, 12, "_initializer") == 0) {
      const std::string name = initializer_name(value, label(l) + ": " + key, t);
      if (!name.empty() && !is_default(type, key, name)) node[key] = name;
      continue;
    }
    if (value.is_object()) {
      node[key] = class_object(value);
      continue;
    }
    if (is_size_key(key)) {
      node[key] = yaml_value(compact(value));
      continue;
    }
    node[key] = yaml_value(value);
  }
}

/// Keras 3's InputLayer (batch_shape) or Keras 2's (batch_input_shape): [None, H, W, C].
void translate_input(const KerasLayer& l, LayerTranslation& t) {
  json shape = json_at(l.config, "batch_shape", json());
  if (shape.is_null()) shape = json_at(l.config, "batch_input_shape", json());
  const bool fixed = shape.is_array() && shape.size() == 4 && shape[1].is_number_integer() &&
                     shape[2].is_number_integer() && shape[3].is_number_integer();
  if (!fixed) {
    t.problems.push_back(label(l) + ": input shape " + shape.dump() + " is not [None, H, W, C] with a fixed H, W and "
                         "C; trainer trains at one size: build the model with keras.Input((H, W, C)), e.g. "
                         "keras.Input((256, 256, 3)), and import it again");
    return;
  }
  t.node["type"] = "Input";
  t.node["name"] = l.name;
  YAML::Node s(YAML::NodeType::Sequence);
  for (int i = 1; i < 4; ++i) s.push_back(shape[size_t(i)].get<long long>());
  t.node["shape"] = s;
}

/// A Lambda's function (Keras 3: {"class_name": "__lambda__", "config": {"code": ...}}; Keras 2:
/// [code, defaults, closure] with function_type "lambda") as x * scale + offset.
std::optional<Affine> lambda_function(const KerasLayer& l) {
  const json f = json_at(l.config, "function", json());
  const json args = json_at(l.config, "arguments", json::object());
  if (args.is_object() && !args.empty()) return std::nullopt;  // values bound to the function's other parameters
  if (f.is_object() && json_text(f, "class_name") == "__lambda__") {
    const json c = json_at(f, "config", json::object());
    if (!json_at(c, "closure", json()).is_null() || !c.contains("code") || !c["code"].is_string()) return std::nullopt;
    return lambda_affine(c["code"].get<std::string>());
  }
  if (f.is_array() && !f.empty() && f[0].is_string() && json_text(l.config, "function_type") == "lambda" &&
      (f.size() < 3 || f[2].is_null()))
    return lambda_affine(f[0].get<std::string>());
  return std::nullopt;
}

/// An operation on one tensor and one number in the functional API (Keras 3: TrueDivide, Multiply, Add,
/// Subtract of keras.src.ops; tf.keras 2: TFOpLambda math.truediv, ...) as x * scale + offset.
std::optional<Affine> operation_function(const KerasLayer& l) {
  if (l.inputs.size() != 1 || l.constants.size() != 1 || !l.constants[0].is_number()) return std::nullopt;
  const double c = l.constants[0].get<double>();
  std::string op = l.class_name == "TFOpLambda" ? json_text(l.config, "function") : l.class_name;
  op = op.substr(op.rfind('.') + 1);
  if (op == "TrueDivide" || op == "Divide" || op == "truediv" || op == "divide") {
    if (!l.tensor_first || c == 0) return std::nullopt;
    return Affine{1 / c, 0};
  }
  if (op == "Multiply" || op == "multiply" || op == "mul") return Affine{c, 0};
  if (op == "Add" || op == "add") return Affine{1, c};
  if (op == "Subtract" || op == "subtract") return l.tensor_first ? Affine{1, -c} : Affine{-1, c};
  return std::nullopt;
}

bool is_operation(const KerasLayer& l) {
  return l.class_name == "TFOpLambda" || l.module.rfind("keras.src.ops", 0) == 0;
}

void as_rescaling(const KerasLayer& l, const Affine& a, LayerTranslation& t) {
  t.node["type"] = "Rescaling";
  t.node["name"] = l.name;
  t.node["scale"] = YAML::Node(shortest(a.scale));
  if (a.offset != 0) t.node["offset"] = YAML::Node(shortest(a.offset));
  t.notes.push_back(label(l) + ": computes x * " + shortest(a.scale) +
                    (a.offset != 0 ? " + " + shortest(a.offset) : std::string()) + ", imported as Rescaling");
}

}  // namespace

YAML::Node yaml_value(const json& value) {
  if (value.is_boolean()) return YAML::Node(value.get<bool>());
  if (value.is_number_integer()) return YAML::Node(value.get<long long>());
  if (value.is_number()) return YAML::Node(shortest(value.get<double>()));
  if (value.is_string()) return YAML::Node(value.get<std::string>());
  if (value.is_array()) {
    YAML::Node s(YAML::NodeType::Sequence);
    s.SetStyle(YAML::EmitterStyle::Flow);
    for (const json& v : value) s.push_back(yaml_value(v));
    return s;
  }
  return YAML::Node();
}

std::string yaml_flow(const YAML::Node& node) {
  YAML::Emitter e;
  e.SetMapFormat(YAML::Flow);
  e.SetSeqFormat(YAML::Flow);
  e << node;
  return e.c_str();
}

LayerTranslation translate_layer(const KerasLayer& l, const std::string& previous) {
  LayerTranslation t;
  t.node = YAML::Node(YAML::NodeType::Map);
  if (l.class_name == "InputLayer") {
    translate_input(l, t);
  } else if (l.class_name == "Lambda" || is_operation(l)) {
    if (const std::optional<Affine> a = l.class_name == "Lambda" ? lambda_function(l) : operation_function(l))
      as_rescaling(l, *a, t);
    else
      t.problems.push_back(label(l) + (l.class_name == "Lambda"
                                           ? ": its function is not x * scale + offset (or was saved by a Python "
                                             "other than 3.8 to 3.12); replace the Lambda by a Keras layer that does "
                                             "the same, e.g. Rescaling(1 / 255) for x / 255, and import again"
                                           : ": an operation on tensors in the functional API that is not x * scale "
                                             "+ offset; write it as a Keras layer, e.g. Rescaling, and import again"));
  } else {
    const std::string type = canonical_layer_type(l.class_name);
    if (!find_layer_factory(type)) {
      t.problems.push_back(label(l) + ": trainer has no " + l.class_name + " layer" + keras_layer_hint(l.class_name) +
                           "; replace it by one of the layers trainer has");
    } else {
      t.node["type"] = type;
      t.node["name"] = l.name;
      translate_arguments(l, type, t.node, t);
    }
  }
  if (l.class_name != "InputLayer" && t.problems.empty()) {
    if (l.inputs.size() > 1) {
      YAML::Node in(YAML::NodeType::Sequence);
      for (const std::string& name : l.inputs) in.push_back(name);
      t.node["inputs"] = in;
    } else if (l.inputs.size() == 1 && l.inputs[0] != previous) {
      t.node["inputs"] = l.inputs[0];
    }
  }
  if (!t.problems.empty()) t.node = YAML::Node();
  return t;
}

std::vector<std::string> check_layer_keys(const YAML::Node& entry) {
  const std::string type = entry["type"].as<std::string>(), name = entry["name"].as<std::string>();
  const std::string what = "layer '" + name + "' (" + type + ")";
  try {
    ParamReader p(entry, "", what);
    for (const char* key : {"name", "type", "inputs", "trainable"}) p.skip(key);
    find_layer_factory(type)(p, name);
    p.finish();
  } catch (const UserError& e) {
    std::string m = e.what();
    const size_t at = m.find(what);
    if (at != std::string::npos) m = m.substr(at);
    if (m.find("unknown key") != std::string::npos)
      m += " (those are trainer's keys for the layer: remove the Keras argument it lacks and import again)";
    return {m};
  }
  return {};
}

}  // namespace trainer
