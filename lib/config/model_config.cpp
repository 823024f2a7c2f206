// The model section: the list of layers, with Keras's default names.
#include <map>
#include <regex>

#include "config/params.h"
#include "config/sections.h"
#include "core/error.h"

namespace trainer {

std::string keras_snake_case(const std::string& type) {
  // keras.utils.generic_utils.to_snake_case (Keras 2.x), without its private-name prefix rule.
  static const std::regex word("(.)([A-Z][a-z0-9]+)"), hump("([a-z])([A-Z])");
  std::string s = std::regex_replace(std::regex_replace(type, word, "$1_$2"), hump, "$1_$2");
  return ascii_lower(s);
}

namespace {

// Layer names end up in checkpoint paths (HDF5 groups) and log lines.
bool valid_layer_name(const std::string& name) {
  if (name.empty()) return false;
  for (char ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.')
      return false;
  return true;
}

}  // namespace

std::string canonical_layer_type(const std::string& type) {
  static const std::pair<const char*, const char*> aliases[] = {
      {"MaxPool2D", "MaxPooling2D"},
      {"AvgPool2D", "AveragePooling2D"},
      {"GlobalAvgPool2D", "GlobalAveragePooling2D"},
      {"GlobalMaxPool2D", "GlobalMaxPooling2D"},
      {"Convolution2D", "Conv2D"},
      {"Convolution2DTranspose", "Conv2DTranspose"},
  };
  for (const auto& [alias, name] : aliases)
    if (type == alias) return name;
  return type;
}

std::string keras_layer_hint(const std::string& type) {
  if (type == "Lambda") return " (for Lambda(lambda x: x / 255) use {type: Rescaling, scale: 0.00392156862745098})";
  if (type == "InputLayer")
    return " (InputLayer is what Keras's get_config calls the Input: write {type: Input, shape: [H, W, C]}, its "
           "batch_shape without the batch)";
  return "";
}

namespace {

/// The line (1-based) of the first layer after layers[i] named `name`; 0 when none is.
int later_layer_line(const YAML::Node& layers, size_t i, const std::string& name) {
  for (size_t k = i + 1; k < layers.size(); ++k) {
    const YAML::Node e = layers[k];
    if (e.IsMap() && e["name"] && e["name"].IsScalar() && e["name"].Scalar() == name) return e.Mark().line + 1;
  }
  return 0;
}

}  // namespace

// Default names follow Keras: snake_case of the type plus a running count of
// the unnamed layers of that type, from 1 ("input_1", "conv2d_1", "conv2d_2",
// "max_pooling2d_1"); a default that an earlier layer's given name already
// holds takes the next free count.
ModelConfig read_model_section(const YAML::Node& node, const std::string& file) {
  ParamReader p(node, file, "model");
  ModelConfig m;
  m.name = p.get_string("name", m.name);
  YAML::Node layers = p.get_node("layers");
  p.finish();
  if (!layers) p.fail("'layers' is required: a list of layers starting with {type: Input, shape: [H, W, C]}");
  if (!layers.IsSequence() || layers.size() == 0)
    p.fail("layers", "must be a non-empty list of layers, e.g. '- {type: Input, shape: [256, 256, 3]}'");

  std::map<std::string, int> count_per_type;
  std::vector<std::string> defined;  // names so far, in order
  std::map<std::string, YAML::Mark> where_defined;
  for (size_t i = 0; i < layers.size(); ++i) {
    const YAML::Node entry = layers[i];
    ParamReader lp(entry, file, "model.layers[" + std::to_string(i) + "]");
    LayerSpec spec;
    spec.node = entry;
    spec.mark = entry.Mark();
    spec.type = canonical_layer_type(lp.get_string("type", std::nullopt));  // Keras's aliases: one class
    if (i == 0 && spec.type != "Input")
      lp.fail("type", "is '" + spec.type + "' but the first layer must be Input" + keras_layer_hint(spec.type) +
                          "; add '- {type: Input, shape: [H, W, C]}' first");
    if (i > 0 && spec.type == "Input")
      lp.fail("type", "is 'Input', which only the first layer may be (a model has one input)");

    if (lp.has("name")) {
      spec.name = lp.get_string("name", std::nullopt);
    } else {
      const std::string base = keras_snake_case(spec.type);
      do spec.name = base + "_" + std::to_string(++count_per_type[spec.type]);
      while (where_defined.count(spec.name));
      lp.skip("name");
    }
    if (!valid_layer_name(spec.name))
      lp.fail("name", "is '" + spec.name + "'; use letters, digits, '_', '-' and '.' only");
    if (auto it = where_defined.find(spec.name); it != where_defined.end())
      lp.fail("name", "is '" + spec.name + "', already the name of the layer at line " +
                          std::to_string(it->second.line + 1) + "; layer names must be unique");

    spec.inputs = lp.get_string_list("inputs", std::vector<std::string>{});
    if (i > 0 && lp.has("inputs") && spec.inputs.empty())
      lp.fail("inputs", "is an empty list; name the layers this one reads, e.g. [conv1], or leave 'inputs' out to "
                        "read the previous layer");
    if (i == 0 && !spec.inputs.empty())
      lp.fail("inputs", "must not be given for the Input layer (it is fed by the data)");
    for (const auto& in : spec.inputs)
      if (!where_defined.count(in)) {
        if (const int later = later_layer_line(layers, i, in))
          lp.fail("inputs", "names '" + in + "', which is defined later (line " + std::to_string(later) + "); a layer "
                            "reads only layers above it: move '" + in + "' before this one");
        lp.fail("inputs", "names '" + in + "', which is not a layer defined before this one" +
                              did_you_mean(in, defined) +
                              "; inputs refer to the names of earlier layers");
      }

    spec.trainable = lp.get_bool("trainable", true);
    if (i == 0 && !spec.trainable)
      lp.fail("trainable", "is false on the Input layer, which has no weights; freeze the layers after it");

    defined.push_back(spec.name);
    where_defined.emplace(spec.name, spec.mark);
    m.layers.push_back(std::move(spec));
  }
  return m;
}

}  // namespace trainer
