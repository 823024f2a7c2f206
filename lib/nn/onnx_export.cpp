#include "nn/onnx_export.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <stdexcept>

#include "core/build_id.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "nn/onnx_graph.h"

namespace trainer {

namespace {

constexpr int kOpset = 13;
constexpr int kIrVersion = 7;  // The IR version of ONNX 1.8, whose newest opset is 13.

/// Declares a float32 graph input or output [N, c, h, w] with a free batch size N.
void declare(onnx::ValueInfoProto* v, const std::string& name, int c, int h, int w) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* s = t->mutable_shape();
  s->add_dim()->set_dim_param("N");
  for (int d : {c, h, w}) s->add_dim()->set_dim_value(d);
}

/// Checks weights against model.weights() (order, names, shapes) and groups them by layer index.
std::vector<LayerWeights> weights_by_layer(const Model& model, const std::vector<WeightRecord>& weights) {
  const std::vector<WeightSlot>& slots = model.weights();
  if (weights.size() != slots.size())
    throw InternalError("export_onnx: " + std::to_string(weights.size()) + " weights for a model with " +
                                std::to_string(slots.size()));
  std::vector<LayerWeights> out(size_t(model.num_layers()));
  for (size_t i = 0; i < slots.size(); ++i) {
    const WeightSlot& s = slots[i];
    const WeightRecord& w = weights[i];
    if (w.layer != model.layer(s.layer).name() || w.name != s.spec.name || w.shape != s.spec.shape ||
        w.values.size() != s.spec.numel())
      throw InternalError("export_onnx: weight " + std::to_string(i) + " '" + w.layer + "/" + w.name +
                                  "' does not match the model's '" + model.layer(s.layer).name() + "/" +
                                  s.spec.name + "'");
    out[size_t(s.layer)][w.name] = &w;
  }
  return out;
}

}  // namespace

void export_onnx(const Model& model, const std::vector<WeightRecord>& weights, const std::string& path,
                 OutputActivation append) {
  if (model.output_is_logits())
    throw InternalError("export_onnx: the model's final sigmoid or softmax was removed (output_is_logits())");
  if (append != OutputActivation::None) {
    const LayerDescription d = model.layer(model.num_layers() - 1).describe();
    if (d.softmax || !d.activation.linear())
      throw InternalError("export_onnx: appending a sigmoid or softmax to a last layer with its own activation");
  }
  const std::vector<LayerWeights> by_layer = weights_by_layer(model, weights);

  onnx::ModelProto proto;
  proto.set_ir_version(kIrVersion);
  proto.set_producer_name("trainer");
  proto.set_producer_version(build_id());
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  onnx::GraphProto& graph = *proto.mutable_graph();
  graph.set_name(model.name());
  OnnxGraph builder(graph);

  const Shape in = model.input_shape(), out = model.output_shape();
  declare(graph.add_input(), "image", in.c, in.h, in.w);
  const int last = model.num_layers() - 1;
  // The ONNX tensor holding each layer's output; Identity layers reuse their input's.
  std::vector<std::string> tensor(size_t(model.num_layers()));
  tensor[0] = "image";
  for (int i = 1; i <= last; ++i) {
    const Layer& layer = model.layer(i);
    OnnxLayerIO io{layer.name(), {}, "", by_layer[size_t(i)]};
    for (int j : model.layer_inputs(i)) io.ins.push_back(tensor[size_t(j)]);
    if (layer.identity_at_inference() && i != last) {
      tensor[size_t(i)] = io.ins[0];
      continue;
    }
    const std::string final_name = append == OutputActivation::None ? "probability" : "logits";
    io.out = tensor[size_t(i)] = i == last ? final_name : layer.name() + "/output";
    layer.to_onnx(builder, io);
  }
  if (last == 0) builder.node("Identity", {"image"}, "probability", "output");
  else if (append == OutputActivation::Sigmoid) builder.node("Sigmoid", {"logits"}, "probability", "probability");
  else if (append == OutputActivation::Softmax)
    builder.node("Softmax", {"logits"}, "probability", "probability").integer("axis", 1);
  declare(graph.add_output(), "probability", out.c, out.h, out.w);

  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    throw InternalError(std::string("export_onnx: the ONNX graph fails ONNX's checker: ") + e.what());
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) throw InternalError("export_onnx: cannot serialise the ONNX model");
  write_file_durable(path, bytes);
}

}  // namespace trainer
