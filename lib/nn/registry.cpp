#include "nn/registry.h"

#include <utility>

namespace trainer {

namespace {
struct Entry {
  const char* type;
  LayerFactory make;
};
const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      {"Input", make_input},
      {"Rescaling", make_rescaling},
      {"Conv2D", make_conv2d},
      {"Conv2DTranspose", make_conv2d_transpose},
      {"MaxPooling2D", make_max_pooling2d},
      {"AveragePooling2D", make_average_pooling2d},
      {"GlobalAveragePooling2D", make_global_average_pooling2d},
      {"GlobalMaxPooling2D", make_global_max_pooling2d},
      {"DepthwiseConv2D", make_depthwise_conv2d},
      {"SeparableConv2D", make_separable_conv2d},
      {"Dense", make_dense},
      {"Reshape", make_reshape},
      {"UpSampling2D", make_up_sampling2d},
      {"Cropping2D", make_cropping2d},
      {"ZeroPadding2D", make_zero_padding2d},
      {"Concatenate", make_concatenate},
      {"Add", make_add},
      {"Multiply", make_multiply},
      {"Activation", make_activation},
      {"LeakyReLU", make_leaky_relu},
      {"ELU", make_elu},
      {"ReLU", make_relu},
      {"Softmax", make_softmax},
      {"PReLU", make_prelu},
      {"BatchNormalization", make_batch_normalization},
      {"GroupNormalization", make_group_normalization},
      {"LayerNormalization", make_layer_normalization},
      {"Dropout", make_dropout},
      {"SpatialDropout2D", make_spatial_dropout2d},
  };
  return entries;
}
}  // namespace

LayerFactory find_layer_factory(const std::string& type) {
  for (const auto& e : registry())
    if (type == e.type) return e.make;
  return nullptr;
}

std::vector<std::string> layer_types() {
  std::vector<std::string> out;
  for (const auto& e : registry()) out.push_back(e.type);
  return out;
}

void require_known_layer_type(const LayerSpec& spec, const std::string& file, const std::string& what) {
  if (find_layer_factory(spec.type)) return;
  const std::vector<std::string> types = layer_types();
  ParamReader p(spec.node, file, what);
  p.fail("type", "is '" + spec.type + "', not a known layer type" + did_you_mean(spec.type, types) +
                     keras_layer_hint(spec.type) + "; known types: " + join_names(types));
}

void require_known_layer_types(const ModelConfig& model, const std::string& file) {
  for (size_t i = 0; i < model.layers.size(); ++i)
    require_known_layer_type(model.layers[i], file, "model.layers[" + std::to_string(i) + "]");
}

}  // namespace trainer
