#include "nn/onnx_graph.h"
#include "core/error.h"

#include <onnx/onnx_pb.h>

#include <limits>
#include <stdexcept>

namespace trainer {

const WeightRecord& OnnxLayerIO::weight(const std::string& key) const {
  const auto it = weights.find(key);
  if (it == weights.end()) throw InternalError("export_onnx: layer '" + name + "' has no weight '" + key + "'");
  return *it->second;
}

namespace {

/// A new attribute of node n, named key, of type t.
onnx::AttributeProto& attribute(onnx::NodeProto& n, const std::string& key, onnx::AttributeProto::AttributeType t) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(key);
  a->set_type(t);
  return *a;
}

}  // namespace

OnnxNode& OnnxNode::ints(const std::string& key, const std::vector<int64_t>& values) {
  onnx::AttributeProto& a = attribute(node_, key, onnx::AttributeProto::INTS);
  for (int64_t x : values) a.add_ints(x);
  return *this;
}

OnnxNode& OnnxNode::integer(const std::string& key, int64_t value) {
  attribute(node_, key, onnx::AttributeProto::INT).set_i(value);
  return *this;
}

OnnxNode& OnnxNode::real(const std::string& key, float value) {
  attribute(node_, key, onnx::AttributeProto::FLOAT).set_f(value);
  return *this;
}

OnnxNode& OnnxNode::text(const std::string& key, const std::string& value) {
  attribute(node_, key, onnx::AttributeProto::STRING).set_s(value);
  return *this;
}

OnnxNode OnnxGraph::node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                         const std::string& name) {
  onnx::NodeProto* n = graph_.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& in : inputs) n->add_input(in);
  n->add_output(output);
  return OnnxNode(*n);
}

std::string OnnxGraph::constant(const std::string& name, const std::vector<int64_t>& dims,
                                const std::vector<float>& values) {
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->mutable_float_data()->Add(values.begin(), values.end());
  return name;
}

std::string OnnxGraph::int_constant(const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(int64_t(values.size()));
  t->mutable_int64_data()->Add(values.begin(), values.end());
  return name;
}

namespace {

/// The activations that are one ONNX operator with at most its alpha: the operator, or nullptr.
const char* single_operator(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::Relu: return "Relu";
    case ActivationKind::Sigmoid: return "Sigmoid";
    case ActivationKind::Tanh: return "Tanh";
    case ActivationKind::Elu: return "Elu";
    case ActivationKind::LeakyRelu: return "LeakyRelu";
    case ActivationKind::Softplus: return "Softplus";
    case ActivationKind::Softsign: return "Softsign";
    case ActivationKind::Exponential: return "Exp";
    default: return nullptr;
  }
}

}  // namespace

void OnnxGraph::activation(Activation a, const std::string& in, const std::string& out, const std::string& name) {
  if (const char* op = single_operator(a.kind)) {
    OnnxNode n = node(op, {in}, out, name);
    if (a.kind == ActivationKind::Elu || a.kind == ActivationKind::LeakyRelu) n.real("alpha", a.alpha);
    return;
  }
  switch (a.kind) {
    case ActivationKind::Selu:
      node("Selu", {in}, out, name).real("alpha", kSeluAlpha).real("gamma", kSeluScale);
      return;
    case ActivationKind::ClippedRelu: {  // min(leaky_relu(x), beta): the cap applies to x > 0 only
      const std::string cap = constant(name + "/max_value", {}, {a.beta}), relu = name + "/relu";
      if (a.alpha == 0.f)
        node("Relu", {in}, relu, relu);
      else
        node("LeakyRelu", {in}, relu, relu).real("alpha", a.alpha);
      // min(r, beta) = r - relu(r - beta): OpenCV 4.6 reads neither Clip's inputs (opset 11+) nor a constant
      // operand of Min, but Sub and Relu of any form.
      node("Sub", {relu, cap}, name + "/over", name + "/over");
      node("Relu", {name + "/over"}, name + "/excess", name + "/excess");
      node("Sub", {relu, name + "/excess"}, out, name);
      return;
    }
    case ActivationKind::HardSigmoid:
      node("HardSigmoid", {in}, out, name).real("alpha", 1.f / 6.f).real("beta", 0.5f);
      return;
    case ActivationKind::Gelu: {  // 0.5 x (1 + erf(x / sqrt 2)); ONNX's Gelu is opset 20
      const std::string root2 = constant(name + "/sqrt2", {}, {1.41421356237f});
      const std::string one = constant(name + "/one", {}, {1.f}), half = constant(name + "/half", {}, {0.5f});
      node("Div", {in, root2}, name + "/scaled", name + "/scaled");
      node("Erf", {name + "/scaled"}, name + "/erf", name + "/erf");
      node("Add", {name + "/erf", one}, name + "/cdf2", name + "/cdf2");
      node("Mul", {in, name + "/cdf2"}, name + "/x_cdf2", name + "/x_cdf2");
      node("Mul", {name + "/x_cdf2", half}, out, name);
      return;
    }
    case ActivationKind::Silu:
      node("Sigmoid", {in}, name + "/gate", name + "/gate");
      node("Mul", {in, name + "/gate"}, out, name);
      return;
    case ActivationKind::HardSilu:  // HardSwish is opset 14; HardSigmoid with Keras 3's 1/6 and 0.5 is relu6(x + 3) / 6
      activation(Activation{ActivationKind::HardSigmoid}, in, name + "/gate", name + "/gate");
      node("Mul", {in, name + "/gate"}, out, name);
      return;
    case ActivationKind::Mish:  // Mish is opset 18
      node("Softplus", {in}, name + "/softplus", name + "/softplus");
      node("Tanh", {name + "/softplus"}, name + "/gate", name + "/gate");
      node("Mul", {in, name + "/gate"}, out, name);
      return;
    default:
      break;
  }
  throw InternalError("export_onnx: layer '" + name + "' has no activation to export");
}

void OnnxGraph::output_activation(const LayerDescription& d, const std::string& in, const std::string& out,
                                  const std::string& name) {
  if (!d.softmax) return activation(d.activation, in, out, name);
  node("Softmax", {in}, out, name).integer("axis", 1);
}

void OnnxGraph::crop(const std::string& in, PadPair h, PadPair w, const std::string& out, const std::string& name) {
  // ends: -(pixels to crop at the end), or "to the end" when there are none.
  auto end = [](int crop) { return crop > 0 ? int64_t(-crop) : std::numeric_limits<int64_t>::max(); };
  node("Slice",
       {in, int_constant(name + "_starts", {h.before, w.before}),
        int_constant(name + "_ends", {end(h.after), end(w.after)}), int_constant(name + "_axes", {2, 3})},
       out, name);
}

std::string OnnxGraph::broadcast(const std::string& in, const Shape& from, const Shape& to, const std::string& name) {
  const std::string out = name + "/expanded";
  if (from.h == to.h && from.w == to.w) {
    node("Expand", {in, int_constant(name + "/shape", {1, to.c, 1, 1})}, out, name + "/expand");
    return out;
  }
  const std::string roi = constant(name + "/roi", {0}, {});
  const std::string scales = constant(name + "/scales", {4}, {1.f, 1.f, float(to.h), float(to.w)});
  const bool one = from.c != to.c;  // a [1, 1, 1] input: then over the channels too
  const std::string resized = one ? name + "/resized" : out;
  node("Resize", {in, roi, scales}, resized, name + "/resize")
      .text("mode", "nearest")  // every output pixel reads the one input pixel
      .text("coordinate_transformation_mode", "asymmetric")
      .text("nearest_mode", "floor");
  if (one) node("Expand", {resized, int_constant(name + "/shape", {1, to.c, 1, 1})}, out, name + "/expand");
  return out;
}

void OnnxGraph::pool(const LayerDescription& d, const OnnxLayerIO& io) {
  node(d.kind == LayerKind::MaxPooling2D ? "MaxPool" : "AveragePool", io.ins, io.out, io.name)
      .ints("kernel_shape", {d.kh, d.kw})
      .ints("strides", {d.stride_h, d.stride_w})
      .ints("pads", {d.pad_h.before, d.pad_w.before, d.pad_h.after, d.pad_w.after});
}

void OnnxGraph::channel_affine(const LayerWeights& w, int64_t c, const std::string& in, const std::string& out,
                               const std::string& name) {
  auto it = w.find("gamma");
  const std::vector<float> gamma = it != w.end() ? it->second->values : std::vector<float>(size_t(c), 1.f);
  it = w.find("beta");
  const std::vector<float> beta = it != w.end() ? it->second->values : std::vector<float>(size_t(c), 0.f);
  node("BatchNormalization",
       {in, constant(name + "/gamma", {c}, gamma), constant(name + "/beta", {c}, beta),
        constant(name + "/mean", {c}, std::vector<float>(size_t(c), 0.f)),
        constant(name + "/variance", {c}, std::vector<float>(size_t(c), 1.f))},
       out, name)
      .real("epsilon", 0.f);
}

}  // namespace trainer
