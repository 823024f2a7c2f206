#include "nn/onnx_export.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>

#include "core/build_id.h"
#include "core/error.h"
#include "io/atomic_file.h"

namespace trainer {

namespace {

constexpr int kOpset = 13;
constexpr int kIrVersion = 7;  // The IR version of ONNX 1.8, whose newest opset is 13.

/// Keras kernel [kh, kw, A, B] -> ONNX [B, A, kh, kw]. Conv2D (A = in, B = out)
/// gives Conv's [out, in, kh, kw]; Conv2DTranspose (A = out, B = in) gives
/// ConvTranspose's [in, out, kh, kw].
std::vector<float> keras_kernel_to_onnx(const WeightRecord& k) {
  const bool dense = k.shape.size() == 2;  // a Dense kernel [a, b]: a 1x1 one
  const int kh = dense ? 1 : k.shape[0], kw = dense ? 1 : k.shape[1];
  const int a = k.shape[k.shape.size() - 2], b = k.shape[k.shape.size() - 1];
  std::vector<float> out(k.values.size());
  for (int y = 0; y < kh; ++y)
    for (int x = 0; x < kw; ++x)
      for (int i = 0; i < a; ++i)
        for (int o = 0; o < b; ++o)
          out[((size_t(o) * a + i) * kh + y) * kw + x] = k.values[((size_t(y) * kw + x) * a + i) * b + o];
  return out;
}

/// Builds the nodes and initializers of one graph.
class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto& g) : g_(g) {}

  /// Adds node op(inputs) -> output named name; returns it for attributes.
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                        const std::string& name) {
    onnx::NodeProto* n = g_.add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& in : inputs) n->add_input(in);
    n->add_output(output);
    return *n;
  }
  /// Adds a float32 initializer; returns its name.
  std::string constant(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
    onnx::TensorProto* t = g_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->mutable_float_data()->Add(values.begin(), values.end());
    return name;
  }

  /// Adds a 1-D int64 initializer; returns its name.
  std::string int_constant(const std::string& name, const std::vector<int64_t>& values) {
    onnx::TensorProto* t = g_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(values.size()));
    t->mutable_int64_data()->Add(values.begin(), values.end());
    return name;
  }

  static void ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void integer(onnx::NodeProto& n, const std::string& name, int64_t v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void real(onnx::NodeProto& n, const std::string& name, float v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void text(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }

 private:
  onnx::GraphProto& g_;
};

/// Declares a float32 graph input or output [N, c, h, w] with a free batch size N.
void declare(onnx::ValueInfoProto* v, const std::string& name, int c, int h, int w) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* s = t->mutable_shape();
  s->add_dim()->set_dim_param("N");
  for (int d : {c, h, w}) s->add_dim()->set_dim_value(d);
}

/// The weights of one layer by Keras name.
using LayerWeights = std::map<std::string, const WeightRecord*>;

/// Checks weights against model.weights() (order, names, shapes) and groups them by layer index.
std::vector<LayerWeights> weights_by_layer(const Model& model, const std::vector<WeightRecord>& weights) {
  const std::vector<WeightSlot>& slots = model.weights();
  if (weights.size() != slots.size())
    throw std::invalid_argument("export_onnx: " + std::to_string(weights.size()) + " weights for a model with " +
                                std::to_string(slots.size()));
  std::vector<LayerWeights> out(size_t(model.num_layers()));
  for (size_t i = 0; i < slots.size(); ++i) {
    const WeightSlot& s = slots[i];
    const WeightRecord& w = weights[i];
    if (w.layer != model.layer(s.layer).name() || w.name != s.spec.name || w.shape != s.spec.shape ||
        w.values.size() != s.spec.numel())
      throw std::invalid_argument("export_onnx: weight " + std::to_string(i) + " '" + w.layer + "/" + w.name +
                                  "' does not match the model's '" + model.layer(s.layer).name() + "/" +
                                  s.spec.name + "'");
    out[size_t(s.layer)][w.name] = &w;
  }
  return out;
}

/// Adds the activation node a(in) -> out (ONNX opset 13 operators, whose
/// formulas match elementwise_math.h); a must not be Linear.
void add_activation(GraphBuilder& b, Activation a, const std::string& in, const std::string& out,
                    const std::string& name) {
  switch (a.kind) {
    case ActivationKind::Relu:
      b.node("Relu", {in}, out, name);
      return;
    case ActivationKind::Sigmoid:
      b.node("Sigmoid", {in}, out, name);
      return;
    case ActivationKind::Tanh:
      b.node("Tanh", {in}, out, name);
      return;
    case ActivationKind::Elu:
      GraphBuilder::real(b.node("Elu", {in}, out, name), "alpha", a.alpha);
      return;
    case ActivationKind::Selu: {
      onnx::NodeProto& n = b.node("Selu", {in}, out, name);
      GraphBuilder::real(n, "alpha", kSeluAlpha);
      GraphBuilder::real(n, "gamma", kSeluScale);
      return;
    }
    case ActivationKind::Softplus:
      b.node("Softplus", {in}, out, name);
      return;
    case ActivationKind::LeakyRelu:
      GraphBuilder::real(b.node("LeakyRelu", {in}, out, name), "alpha", a.alpha);
      return;
    case ActivationKind::ClippedRelu: {  // min(leaky_relu(x), beta): the cap applies to x > 0 only
      const std::string cap = b.constant(name + "/max_value", {}, {a.beta}), relu = name + "/relu";
      if (a.alpha == 0.f)
        b.node("Relu", {in}, relu, relu);
      else
        GraphBuilder::real(b.node("LeakyRelu", {in}, relu, relu), "alpha", a.alpha);
      // min(r, beta) = r - relu(r - beta): OpenCV 4.6 reads neither Clip's inputs (opset 11+) nor a constant
      // operand of Min, but Sub and Relu of any form.
      b.node("Sub", {relu, cap}, name + "/over", name + "/over");
      b.node("Relu", {name + "/over"}, name + "/excess", name + "/excess");
      b.node("Sub", {relu, name + "/excess"}, out, name);
      return;
    }
    case ActivationKind::HardSigmoid: {
      onnx::NodeProto& n = b.node("HardSigmoid", {in}, out, name);
      GraphBuilder::real(n, "alpha", 1.f / 6.f);
      GraphBuilder::real(n, "beta", 0.5f);
      return;
    }
    case ActivationKind::Softsign:
      b.node("Softsign", {in}, out, name);
      return;
    case ActivationKind::Exponential:
      b.node("Exp", {in}, out, name);
      return;
    case ActivationKind::Gelu: {  // 0.5 x (1 + erf(x / sqrt 2)); ONNX's Gelu is opset 20
      const std::string root2 = b.constant(name + "/sqrt2", {}, {1.41421356237f});
      const std::string one = b.constant(name + "/one", {}, {1.f}), half = b.constant(name + "/half", {}, {0.5f});
      b.node("Div", {in, root2}, name + "/scaled", name + "/scaled");
      b.node("Erf", {name + "/scaled"}, name + "/erf", name + "/erf");
      b.node("Add", {name + "/erf", one}, name + "/cdf2", name + "/cdf2");
      b.node("Mul", {in, name + "/cdf2"}, name + "/x_cdf2", name + "/x_cdf2");
      b.node("Mul", {name + "/x_cdf2", half}, out, name);
      return;
    }
    case ActivationKind::Silu:
      b.node("Sigmoid", {in}, name + "/gate", name + "/gate");
      b.node("Mul", {in, name + "/gate"}, out, name);
      return;
    case ActivationKind::HardSilu:  // HardSwish is opset 14; HardSigmoid with Keras 3's 1/6 and 0.5 is relu6(x + 3) / 6
      add_activation(b, Activation{ActivationKind::HardSigmoid}, in, name + "/gate", name + "/gate");
      b.node("Mul", {in, name + "/gate"}, out, name);
      return;
    case ActivationKind::Mish:  // Mish is opset 18
      b.node("Softplus", {in}, name + "/softplus", name + "/softplus");
      b.node("Tanh", {name + "/softplus"}, name + "/gate", name + "/gate");
      b.node("Mul", {in, name + "/gate"}, out, name);
      return;
    case ActivationKind::Linear:
      break;
  }
  throw std::invalid_argument("export_onnx: layer '" + name + "' has no activation to export");
}

/// Adds what follows a layer's linear part, d's activation or its softmax over
/// the channels (ONNX Softmax on axis 1 of NCHW, opset 13's one-axis form), in -> out.
void add_output_activation(GraphBuilder& b, const LayerDescription& d, const std::string& in, const std::string& out,
                           const std::string& name) {
  if (!d.softmax) return add_activation(b, d.activation, in, out, name);
  GraphBuilder::integer(b.node("Softmax", {in}, out, name), "axis", 1);
}

/// Adds a Slice node in -> out removing rows h and columns w (before: top /
/// left, after: bottom / right) of an NCHW tensor; its constants are named
/// after name.
void add_crop(GraphBuilder& b, const std::string& in, PadPair h, PadPair w, const std::string& out,
              const std::string& name) {
  // ends: -(pixels to crop at the end), or "to the end" when there are none.
  auto end = [](int crop) { return crop > 0 ? int64_t(-crop) : std::numeric_limits<int64_t>::max(); };
  b.node("Slice",
         {in, b.int_constant(name + "_starts", {h.before, w.before}),
          b.int_constant(name + "_ends", {end(h.after), end(w.after)}), b.int_constant(name + "_axes", {2, 3})},
         out, name);
}

/// Adds the nodes bringing input `in` of per-sample shape `from` (1 channel,
/// or 1x1 pixels of `to`'s channels or 1) to shape `to`, as Keras broadcasts;
/// returns the result's name (constants and nodes named after name). OpenCV's
/// dnn (4.6) does not broadcast Mul's or Add's inputs (ONNX would): one
/// channel goes through an Expand over the channels, 1x1 pixels through a
/// nearest Resize to H x W (OpenCV's Expand over H and W loses the batch
/// dimension), then for one value also the Expand over the channels.
std::string add_broadcast(GraphBuilder& b, const std::string& in, const Shape& from, const Shape& to,
                          const std::string& name) {
  const std::string out = name + "/expanded";
  if (from.h == to.h && from.w == to.w) {
    b.node("Expand", {in, b.int_constant(name + "/shape", {1, to.c, 1, 1})}, out, name + "/expand");
    return out;
  }
  const std::string roi = b.constant(name + "/roi", {0}, {});
  const std::string scales = b.constant(name + "/scales", {4}, {1.f, 1.f, float(to.h), float(to.w)});
  const bool one = from.c != to.c;  // a [1, 1, 1] input: then over the channels too
  const std::string resized = one ? name + "/resized" : out;
  onnx::NodeProto& n = b.node("Resize", {in, roi, scales}, resized, name + "/resize");
  GraphBuilder::text(n, "mode", "nearest");  // every output pixel reads the one input pixel
  GraphBuilder::text(n, "coordinate_transformation_mode", "asymmetric");
  GraphBuilder::text(n, "nearest_mode", "floor");
  if (one) b.node("Expand", {resized, b.int_constant(name + "/shape", {1, to.c, 1, 1})}, out, name + "/expand");
  return out;
}

/// Adds out = gamma[c] * in + beta[c] over the channels of an NCHW tensor
/// (w's "gamma" and "beta", 1 and 0 when absent) as a BatchNormalization of
/// mean 0, variance 1 and epsilon 0: exact, and read by OpenCV 4.6, which
/// broadcasts no Mul. Constants named after name.
void add_channel_affine(GraphBuilder& b, const LayerWeights& w, int64_t c, const std::string& in,
                        const std::string& out, const std::string& name) {
  auto it = w.find("gamma");
  const std::vector<float> gamma = it != w.end() ? it->second->values : std::vector<float>(size_t(c), 1.f);
  it = w.find("beta");
  const std::vector<float> beta = it != w.end() ? it->second->values : std::vector<float>(size_t(c), 0.f);
  onnx::NodeProto& affine =
      b.node("BatchNormalization",
             {in, b.constant(name + "/gamma", {c}, gamma), b.constant(name + "/beta", {c}, beta),
              b.constant(name + "/mean", {c}, std::vector<float>(size_t(c), 0.f)),
              b.constant(name + "/variance", {c}, std::vector<float>(size_t(c), 1.f))},
             out, name);
  GraphBuilder::real(affine, "epsilon", 0.f);
}

/// Adds the nodes of one layer computing out from ins; name prefixes its node
/// and initializer names (the layer's name).
void add_layer(GraphBuilder& b, const std::string& name, const LayerDescription& d, const LayerWeights& w,
               const std::vector<std::string>& ins, const std::string& out) {
  switch (d.kind) {
    case LayerKind::Input:
      throw std::invalid_argument("export_onnx: layer '" + name + "' is an Input layer after the first layer");
    case LayerKind::Identity:
      b.node("Identity", ins, out, name);
      return;
    case LayerKind::Rescaling: {
      const std::string scale = b.constant(name + "/scale", {1}, {d.scale});
      if (d.offset == 0.f) {
        b.node("Mul", {ins[0], scale}, out, name + "/mul");
        return;
      }
      const std::string offset = b.constant(name + "/offset", {1}, {d.offset});
      b.node("Mul", {ins[0], scale}, name + "/scaled", name + "/mul");
      b.node("Add", {name + "/scaled", offset}, out, name + "/add");
      return;
    }
    case LayerKind::Conv2D:
    case LayerKind::Conv2DTranspose: {
      // A DepthwiseConv2D's depthwise_kernel [kh, kw, Cin, M] holds the grouped kernel [kh, kw, 1, Cin * M].
      const auto depthwise = w.find("depthwise_kernel");
      WeightRecord kernel = depthwise != w.end() ? *depthwise->second : *w.at("kernel");
      if (depthwise != w.end()) kernel.shape = {kernel.shape[0], kernel.shape[1], 1, kernel.shape[2] * kernel.shape[3]};
      const bool conv = d.kind == LayerKind::Conv2D;
      const size_t rank = kernel.shape.size();  // [kh, kw, a, c] (a per group), or a Dense layer's [a, c]
      const int a = kernel.shape[rank - 2], c = kernel.shape[rank - 1];
      std::vector<std::string> inputs{
          ins[0], b.constant(name + "/kernel", {c, a, d.kh, d.kw}, keras_kernel_to_onnx(kernel))};
      if (d.use_bias) {
        const WeightRecord& bias = *w.at("bias");
        inputs.push_back(b.constant(name + "/bias", {int64_t(bias.values.size())}, bias.values));
      }
      const bool act = !d.activation.linear() || d.softmax;
      const std::string pre = act ? name + "/preactivation" : out;
      // OpenCV's dnn (4.6) rejects asymmetric ConvTranspose pads: the transposed
      // convolution crops the symmetric part and a Slice the rest (TensorFlow's
      // 'same' puts the extra pixel at the end).
      const PadPair ph = d.pad_h, pw = d.pad_w;
      const int sh = conv ? 0 : std::min(ph.before, ph.after), sw = conv ? 0 : std::min(pw.before, pw.after);
      const bool slice = !conv && (ph.before != ph.after || pw.before != pw.after);
      const std::string conv_out = slice ? name + "/uncropped" : pre;
      onnx::NodeProto& n = b.node(conv ? "Conv" : "ConvTranspose", inputs, conv_out, name);
      GraphBuilder::ints(n, "kernel_shape", {d.kh, d.kw});
      GraphBuilder::ints(n, "strides", {d.stride_h, d.stride_w});
      if (conv) {
        GraphBuilder::ints(n, "pads", {ph.before, pw.before, ph.after, pw.after});
        if (d.groups > 1) GraphBuilder::integer(n, "group", d.groups);
        if (d.dilation_h > 1 || d.dilation_w > 1) GraphBuilder::ints(n, "dilations", {d.dilation_h, d.dilation_w});
      } else {
        GraphBuilder::ints(n, "pads", {sh, sw, sh, sw});
        // Keras gives in*stride pixels even when the kernel is smaller than the
        // stride, ONNX (in-1)*stride + k: output_padding adds what is missing.
        const int extra_h = std::max(0, d.stride_h - d.kh), extra_w = std::max(0, d.stride_w - d.kw);
        if (extra_h || extra_w) GraphBuilder::ints(n, "output_padding", {extra_h, extra_w});
      }
      if (slice) {
        add_crop(b, conv_out, PadPair{ph.before - sh, ph.after - sh}, PadPair{pw.before - sw, pw.after - sw}, pre,
                 name + "/crop");
      }
      if (act) add_output_activation(b, d, pre, out, name + "/activation");
      return;
    }
    case LayerKind::SeparableConv2D: {
      // The depthwise convolution (no bias, linear), then a 1x1 Conv2D with the
      // pointwise kernel, the bias and the activation.
      LayerDescription depthwise = d;
      depthwise.kind = LayerKind::Conv2D;
      depthwise.use_bias = false;
      depthwise.activation = Activation{};
      depthwise.softmax = false;
      add_layer(b, name + "/depthwise", depthwise, {{"depthwise_kernel", w.at("depthwise_kernel")}}, ins,
                name + "/depthwise_output");
      LayerDescription pointwise = d;
      pointwise.kind = LayerKind::Conv2D;
      pointwise.kh = pointwise.kw = pointwise.stride_h = pointwise.stride_w = 1;
      pointwise.dilation_h = pointwise.dilation_w = pointwise.groups = 1;
      pointwise.pad_h = pointwise.pad_w = PadPair{};
      LayerWeights pointwise_w{{"kernel", w.at("pointwise_kernel")}};
      if (d.use_bias) pointwise_w["bias"] = w.at("bias");
      add_layer(b, name, pointwise, pointwise_w, {name + "/depthwise_output"}, out);
      return;
    }
    case LayerKind::MaxPooling2D:
    case LayerKind::AveragePooling2D: {  // AveragePool's count_include_pad 0 (the default): TensorFlow's mean
      onnx::NodeProto& n = b.node(d.kind == LayerKind::MaxPooling2D ? "MaxPool" : "AveragePool", ins, out, name);
      GraphBuilder::ints(n, "kernel_shape", {d.kh, d.kw});
      GraphBuilder::ints(n, "strides", {d.stride_h, d.stride_w});
      GraphBuilder::ints(n, "pads", {d.pad_h.before, d.pad_w.before, d.pad_h.after, d.pad_w.after});
      return;
    }
    case LayerKind::UpSampling2D: {
      const std::string roi = b.constant(name + "/roi", {0}, {});
      const std::string scales = b.constant(name + "/scales", {4}, {1.f, 1.f, float(d.size_h), float(d.size_w)});
      onnx::NodeProto& n = b.node("Resize", {ins[0], roi, scales}, out, name);
      if (d.bilinear) {  // TensorFlow's half_pixel_centers
        GraphBuilder::text(n, "mode", "linear");
        GraphBuilder::text(n, "coordinate_transformation_mode", "half_pixel");
        return;
      }
      GraphBuilder::text(n, "mode", "nearest");
      GraphBuilder::text(n, "coordinate_transformation_mode", "asymmetric");
      GraphBuilder::text(n, "nearest_mode", "floor");
      return;
    }
    case LayerKind::Cropping2D:
      add_crop(b, ins[0], d.pad_h, d.pad_w, out, name);
      return;
    case LayerKind::ZeroPadding2D: {  // pads: the starts of N, C, H, W, then their ends
      const PadPair h = d.pad_h, w = d.pad_w;
      const std::string pads = b.int_constant(name + "/pads", {0, 0, h.before, w.before, 0, 0, h.after, w.after});
      GraphBuilder::text(b.node("Pad", {ins[0], pads}, out, name), "mode", "constant");
      return;
    }
    case LayerKind::Concatenate: {
      onnx::NodeProto& n = b.node("Concat", ins, out, name);
      GraphBuilder::integer(n, "axis", 1);
      return;
    }
    case LayerKind::PReLU: {  // Keras's alpha [ah, aw, ac] as ONNX's slope [ac, ah, aw], broadcast over N, C, H, W
      const WeightRecord& alpha = *w.at("alpha");
      const int ah = alpha.shape[0], aw = alpha.shape[1], ac = alpha.shape[2];
      std::vector<float> slope(alpha.values.size());
      for (int c = 0; c < ac; ++c)
        for (int h = 0; h < ah; ++h)
          for (int x = 0; x < aw; ++x) slope[(size_t(c) * ah + h) * aw + x] = alpha.values[(size_t(h) * aw + x) * ac + c];
      b.node("PRelu", {ins[0], b.constant(name + "/slope", {ac, ah, aw}, slope)}, out, name);
      return;
    }
    case LayerKind::Multiply: {
      std::vector<std::string> factors{ins[0], ins[1]};
      if (d.broadcast_input >= 0) {
        std::string& narrow = factors[size_t(d.broadcast_input)];
        narrow = add_broadcast(b, narrow, d.input, d.output, name);
      }
      b.node("Mul", factors, out, name);
      return;
    }
    case LayerKind::Reshape: {
      // Keras reshapes in NHWC order: to NHWC, Reshape, back to NCHW; a plain
      // Reshape where NCHW gives the same result: the channels are kept (only
      // the pixels are regrouped), or both shapes have one layout (1 channel
      // or 1x1 pixels: NCHW and NHWC then order the elements alike).
      const Shape &from = d.input, &to = d.output;
      auto one_layout = [](const Shape& s) { return s.c == 1 || (s.h == 1 && s.w == 1); };
      if (from.c == to.c || (one_layout(from) && one_layout(to))) {
        b.node("Reshape", {ins[0], b.int_constant(name + "/shape", {0, to.c, to.h, to.w})}, out, name);
        return;
      }
      GraphBuilder::ints(b.node("Transpose", ins, name + "/nhwc", name + "/to_nhwc"), "perm", {0, 2, 3, 1});
      b.node("Reshape", {name + "/nhwc", b.int_constant(name + "/shape", {0, to.h, to.w, to.c})},
             name + "/reshaped", name);
      GraphBuilder::ints(b.node("Transpose", {name + "/reshaped"}, out, name + "/to_nchw"), "perm", {0, 3, 1, 2});
      return;
    }
    case LayerKind::Add: {
      std::vector<std::string> terms = ins;
      for (size_t k = 0; k < terms.size(); ++k)
        if (!d.input_shapes[k].same_sample(d.output))
          terms[k] = add_broadcast(b, terms[k], d.input_shapes[k], d.output, name + "/" + std::to_string(k));
      std::string sum = terms[0];
      for (size_t k = 1; k < terms.size(); ++k) {
        const std::string next = k + 1 == terms.size() ? out : name + "/sum" + std::to_string(k);
        b.node("Add", {sum, terms[k]}, next, name + "/add" + std::to_string(k));
        sum = next;
      }
      return;
    }
    case LayerKind::Activation:
      if (d.activation.linear() && !d.softmax)
        b.node("Identity", ins, out, name);
      else
        add_output_activation(b, d, ins[0], out, name);
      return;
    case LayerKind::BatchNormalization: {
      const WeightRecord& mean = *w.at("moving_mean");
      const int64_t c = int64_t(mean.values.size());
      auto it = w.find("gamma");
      const std::vector<float> gamma = it != w.end() ? it->second->values : std::vector<float>(size_t(c), 1.f);
      it = w.find("beta");
      const std::vector<float> beta = it != w.end() ? it->second->values : std::vector<float>(size_t(c), 0.f);
      onnx::NodeProto& n = b.node("BatchNormalization",
                                  {ins[0], b.constant(name + "/gamma", {c}, gamma), b.constant(name + "/beta", {c}, beta),
                                   b.constant(name + "/moving_mean", {c}, mean.values),
                                   b.constant(name + "/moving_variance", {c}, w.at("moving_variance")->values)},
                                  out, name);
      GraphBuilder::real(n, "epsilon", float(d.epsilon));
      return;
    }
    case LayerKind::GroupNormalization: {
      // ONNX's GroupNormalization is opset 18: [N, groups, C / groups * H * W] (NCHW keeps a group's
      // channels together), InstanceNormalization over the last axis, back to [N, C, H, W], then gamma and
      // beta (add_channel_affine).
      const Shape& s = d.input;
      const int64_t c = s.c, g = d.groups;
      b.node("Reshape", {ins[0], b.int_constant(name + "/grouped_shape", {0, g, -1})}, name + "/grouped",
             name + "/group");
      onnx::NodeProto& n = b.node("InstanceNormalization",
                                  {name + "/grouped", b.constant(name + "/ones", {g}, std::vector<float>(size_t(g), 1.f)),
                                   b.constant(name + "/zeros", {g}, std::vector<float>(size_t(g), 0.f))},
                                  name + "/normalized", name + "/normalize");
      GraphBuilder::real(n, "epsilon", float(d.epsilon));
      b.node("Reshape", {name + "/normalized", b.int_constant(name + "/shape", {0, c, s.h, s.w})}, name + "/ungrouped",
             name + "/ungroup");
      add_channel_affine(b, w, c, name + "/ungrouped", out, name);
      return;
    }
    case LayerKind::LayerNormalization: {
      // ONNX's LayerNormalization is opset 17: each pixel's channels as a row of [N * H * W, 1, C] (NHWC
      // order), InstanceNormalization over it, back to [N, C, H, W], then gamma and beta as for GroupNormalization.
      const Shape& s = d.input;
      const int64_t c = s.c;
      GraphBuilder::ints(b.node("Transpose", ins, name + "/nhwc", name + "/to_nhwc"), "perm", {0, 2, 3, 1});
      b.node("Reshape", {name + "/nhwc", b.int_constant(name + "/rows_shape", {-1, 1, c})}, name + "/rows",
             name + "/to_rows");
      onnx::NodeProto& n = b.node("InstanceNormalization",
                                  {name + "/rows", b.constant(name + "/one", {1}, {1.f}),
                                   b.constant(name + "/zero", {1}, {0.f})},
                                  name + "/normalized", name + "/normalize");
      GraphBuilder::real(n, "epsilon", float(d.epsilon));
      b.node("Reshape", {name + "/normalized", b.int_constant(name + "/shape", {-1, s.h, s.w, c})},
             name + "/normalized_nhwc", name + "/from_rows");
      GraphBuilder::ints(b.node("Transpose", {name + "/normalized_nhwc"}, name + "/nchw", name + "/to_nchw"), "perm",
                         {0, 3, 1, 2});
      add_channel_affine(b, w, c, name + "/nchw", out, name);
      return;
    }
  }
  throw std::invalid_argument("export_onnx: layer '" + name + "' has an unknown kind");
}

}  // namespace

void export_onnx(const Model& model, const std::vector<WeightRecord>& weights, const std::string& path,
                 OutputActivation append) {
  if (model.output_is_logits())
    throw std::invalid_argument("export_onnx: the model's final sigmoid or softmax was removed (output_is_logits())");
  if (append != OutputActivation::None) {
    const LayerDescription d = model.layer(model.num_layers() - 1).describe();
    if (d.softmax || !d.activation.linear())
      throw std::invalid_argument("export_onnx: appending a sigmoid or softmax to a last layer with its own activation");
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
  GraphBuilder builder(graph);

  const Shape in = model.input_shape(), out = model.output_shape();
  declare(graph.add_input(), "image", in.c, in.h, in.w);
  const int last = model.num_layers() - 1;
  // The ONNX tensor holding each layer's output; Identity layers reuse their input's.
  std::vector<std::string> tensor(size_t(model.num_layers()));
  tensor[0] = "image";
  for (int i = 1; i <= last; ++i) {
    const Layer& layer = model.layer(i);
    const LayerDescription d = layer.describe();
    std::vector<std::string> ins;
    for (int j : model.layer_inputs(i)) ins.push_back(tensor[size_t(j)]);
    const bool alias = d.kind == LayerKind::Identity ||
                       (d.kind == LayerKind::Activation && d.activation.linear() && !d.softmax);
    if (alias && i != last) {
      tensor[size_t(i)] = ins[0];
      continue;
    }
    const std::string final_name = append == OutputActivation::None ? "probability" : "logits";
    tensor[size_t(i)] = i == last ? final_name : layer.name() + "/output";
    add_layer(builder, layer.name(), d, by_layer[size_t(i)], ins, tensor[size_t(i)]);
  }
  if (last == 0) builder.node("Identity", {"image"}, "probability", "output");
  else if (append == OutputActivation::Sigmoid) builder.node("Sigmoid", {"logits"}, "probability", "probability");
  else if (append == OutputActivation::Softmax)
    GraphBuilder::integer(builder.node("Softmax", {"logits"}, "probability", "probability"), "axis", 1);
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
