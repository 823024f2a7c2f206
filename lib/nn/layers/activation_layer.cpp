// Activation (keras.layers.Activation): y = f(x) element-wise, f one of
// linear, relu, sigmoid (nn/activation.h). YAML: {type: Activation, activation: relu}
// (required). No weights.
#include "core/error.h"
#include "nn/activation.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class ActivationLayer : public Layer {
 public:
  ActivationLayer(std::string name, Activation a) : Layer(std::move(name)), act_(a) {}
  std::string type() const override { return "Activation"; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::Activation;
    d.activation = act_;
    return d;
  }

  /// One input; same shape out. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("Activation takes exactly 1 input, got " + std::to_string(inputs.size()));
    return inputs[0];
  }
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    y = *x[0];
    activation_forward(ctx.device, act_, y.data(), y.numel());
  }
  /// dx = dy * f'(x), f' written through y (see activation_backward).
  void backward(const Context& ctx, const std::vector<const Tensor*>&, const Tensor& y, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    dx[0]->resize(dy.shape());
    activation_backward(ctx.device, act_, y.data(), dy.data(), dx[0]->data(), dy.numel());
  }
  /// A sigmoid becomes linear (the output is then logits).
  bool strip_final_sigmoid() override {
    if (act_ != Activation::Sigmoid) return false;
    act_ = Activation::Linear;
    return true;
  }

 private:
  Activation act_;
};

}  // namespace

std::unique_ptr<Layer> make_activation(ParamReader& p, const std::string& name) {
  if (!p.has("activation"))
    p.fail("'activation' is required; add 'activation: <name>' with one of: " +
           join_names(activation_names()));
  return std::make_unique<ActivationLayer>(name, read_activation(p, "activation"));
}

}  // namespace trainer
