// Activation (keras.layers.Activation): y = f(x) element-wise, f one of the
// activations of nn/activation.h. YAML: {type: Activation, activation: relu}
// (required). No weights. Keras's activation layers are the same layer with
// their parameter: LeakyReLU (negative_slope, default 0.3; Keras 2's 'alpha'),
// ELU (alpha, default 1.0), ReLU (negative_slope, default 0; max_value,
// default none; threshold only at its default 0) and Softmax (axis -1, the channels;
// the model's last layer only, as activation: softmax).
#include "core/error.h"
#include "nn/activation.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class ActivationLayer : public Layer {
 public:
  /// type: the Keras layer type it was built from (for summaries and errors).
  /// softmax: a softmax over the channels instead of a (which is then linear).
  ActivationLayer(std::string name, std::string type, Activation a, bool softmax = false)
      : Layer(std::move(name)), type_(std::move(type)), act_(a), softmax_(softmax) {}
  std::string type() const override { return type_; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::Activation;
    d.activation = act_;
    d.softmax = softmax_;
    return d;
  }
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    if (identity_at_inference())
      g.node("Identity", io.ins, io.out, io.name);
    else
      g.output_activation(describe(), io.ins[0], io.out, io.name);
  }
  bool identity_at_inference() const override {
    const LayerDescription d = describe();
    return d.activation.linear() && !d.softmax;
  }

  /// One input; same shape out. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError(type_ + " takes exactly 1 input, got " + std::to_string(inputs.size()));
    return inputs[0];
  }
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    y = *x[0];
    if (softmax_)
      softmax_channels(ctx.device, y.data(), y.numel() / size_t(y.shape().c), y.shape().c);
    else
      activation_forward(ctx.device, act_, y.data(), y.numel());
  }
  /// dx = dy * f'(x), f' written through y, or through x for the kinds that
  /// need it (see activation_backward).
  /// The input where the derivative needs it (kept_activation.h), else the output.
  BackwardReads backward_reads() const override {
    const bool input = activation_needs_input(act_.kind);
    return {input, !input};
  }
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    if (softmax_)  // Model allows softmax on the last layer only, and training strips it there
      throw InternalError("layer '" + name() + "': backward through a softmax");
    dx[0]->resize(dy.shape());
    const Tensor& v = activation_needs_input(act_.kind) ? *x[0] : y;
    activation_backward(ctx.device, act_, v.data(), dy.data(), dx[0]->data(), dy.numel());
  }
  /// A sigmoid or softmax becomes linear (the output is then logits).
  OutputActivation strip_output_activation() override { return trainer::strip_output_activation(act_, softmax_); }
  bool has_softmax() const override { return softmax_; }

 private:
  std::string type_;
  Activation act_;
  bool softmax_;
};

}  // namespace

std::unique_ptr<Layer> make_activation(ParamReader& p, const std::string& name) {
  if (!p.has("activation"))
    p.fail("'activation' is required; add 'activation: <name>' with one of: " +
           join_names(activation_names()) + ", softmax (the last layer only)");
  bool softmax = false;
  const Activation a = read_activation(p, softmax, "activation");
  return std::make_unique<ActivationLayer>(name, "Activation", a, softmax);
}

namespace {

/// Keras 3's negative_slope, or Keras 2's alpha (not both), >= 0; def when absent.
float read_negative_slope(ParamReader& p, double def) {
  if (p.has_optional("alpha") && p.has("negative_slope"))
    p.fail("alpha", "is Keras 2's name of 'negative_slope'; give only 'negative_slope'");
  const std::string key = p.has("alpha") ? "alpha" : "negative_slope";
  return float(p.get_double(key, def, 0.0, 1e6));
}

}  // namespace

std::unique_ptr<Layer> make_leaky_relu(ParamReader& p, const std::string& name) {
  return std::make_unique<ActivationLayer>(name, "LeakyReLU",
                                           Activation{ActivationKind::LeakyRelu, read_negative_slope(p, 0.3)});
}

std::unique_ptr<Layer> make_elu(ParamReader& p, const std::string& name) {
  const double alpha = p.get_double("alpha", 1.0, 0.0, 1e6);
  if (alpha <= 0.0) p.fail("alpha", "must be > 0 (the gradient is taken from the output, which needs alpha > 0)");
  return std::make_unique<ActivationLayer>(name, "ELU", Activation{ActivationKind::Elu, float(alpha)});
}

std::unique_ptr<Layer> make_relu(ParamReader& p, const std::string& name) {
  if (p.get_double("threshold", 0.0) != 0.0) p.fail("threshold", "must be 0 (the only threshold supported)");
  const float slope = float(p.get_double("negative_slope", 0.0, 0.0, 1e6));
  p.skip("max_value");  // known when absent too (unknown-key suggestions)
  if (p.given("max_value")) {  // null: Keras's default, no cap
    const double cap = p.get_double("max_value", std::nullopt, 0.0, 3.4e38);
    if (cap <= 0.0) p.fail("max_value", "must be > 0 (the cap of the ReLU, e.g. 6 for ReLU6), got 0");
    return std::make_unique<ActivationLayer>(name, "ReLU", Activation{ActivationKind::ClippedRelu, slope, float(cap)});
  }
  const Activation a = slope > 0.f ? Activation{ActivationKind::LeakyRelu, slope} : Activation{ActivationKind::Relu};
  return std::make_unique<ActivationLayer>(name, "ReLU", a);
}

std::unique_ptr<Layer> make_softmax(ParamReader& p, const std::string& name) {
  const int axis = p.get_int("axis", -1);
  if (axis != -1 && axis != 3)
    p.fail("axis", "is " + std::to_string(axis) + "; only the channel axis (-1, Keras's default) is supported");
  return std::make_unique<ActivationLayer>(name, "Softmax", Activation{}, true);
}

}  // namespace trainer
