#include "train/model_graph.h"

#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "io/tensorboard_event.pb.h"

namespace trainer {

std::string model_graph_def(const Model& model, const ModelConfig& config) {
  if (int(config.layers.size()) != model.num_layers())
    throw InternalError("model_graph_def: the config has " + std::to_string(config.layers.size()) +
                        " layers, the model " + std::to_string(model.num_layers()));
  std::vector<size_t> params(size_t(model.num_layers()), 0);
  for (const WeightSlot& w : model.weights()) params[size_t(w.layer)] += w.spec.numel();
  tensorboard::GraphDef graph;
  for (int i = 0; i < model.num_layers(); ++i) {
    const Layer& layer = model.layer(i);
    const LayerSpec& spec = config.layers[size_t(i)];
    if (spec.name != layer.name())
      throw InternalError("model_graph_def: config layer " + std::to_string(i) + " is '" + spec.name +
                          "', the model's '" + layer.name() + "'");
    tensorboard::NodeDef* node = graph.add_node();
    node->set_name(layer.name());
    node->set_op(layer.type());
    for (int j : model.layer_inputs(i)) node->add_input(model.layer(j).name());
    auto& attr = *node->mutable_attr();
    const Shape s = model.layer_output_shape(i);
    tensorboard::TensorShapeProto* shape = attr["_output_shapes"].mutable_list()->add_shape();
    for (int d : {-1, s.h, s.w, s.c}) shape->add_dim()->set_size(d);
    attr["params"].set_i(int64_t(params[size_t(i)]));
    if (!spec.node.IsMap()) continue;
    for (const auto& kv : spec.node) {
      const std::string key = kv.first.Scalar();
      if (key == "type" || key == "name" || key == "inputs") continue;
      YAML::Emitter flow;
      flow << YAML::Flow << kv.second;
      attr[key].set_s(flow.c_str());
    }
  }
  return graph.SerializeAsString();
}

}  // namespace trainer
