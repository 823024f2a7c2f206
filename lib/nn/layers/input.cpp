// Input (Keras keras.Input / InputLayer): the entry point of a model.
// YAML: {type: Input, shape: [H, W, C]} (required, three positive integers).
//
// The model writes each batch [N, H, W, C] straight into this layer's output
// tensor, so forward and backward have nothing to compute: they do nothing.
#include "core/error.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class Input : public Layer {
 public:
  Input(std::string name, Shape shape) : Layer(std::move(name)), shape_(shape) {}
  std::string type() const override { return "Input"; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::Input;
    return d;
  }
  /// The graph's input itself; an Input after the first layer has no place in a graph.
  void to_onnx(OnnxGraph&, const OnnxLayerIO& io) const override {
    throw InternalError("export_onnx: layer '" + io.name + "' is an Input layer after the first layer");
  }

  /// Takes no inputs; returns the configured per-sample shape [H, W, C].
  /// UserError when given inputs.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (!inputs.empty())
      throw UserError("Input takes no inputs, got " + std::to_string(inputs.size()) +
                      "; remove its 'inputs' key");
    return shape_;
  }
  /// No-op: the model has already written the batch into y.
  void forward(const Context&, const std::vector<const Tensor*>&, Tensor&) override {}
  /// No-op: there is nothing upstream to propagate to.
  void backward(const Context&, const std::vector<const Tensor*>&, const Tensor&, const Tensor&,
                const std::vector<Tensor*>&) override {}

 private:
  Shape shape_;
};

}  // namespace

std::unique_ptr<Layer> make_input(ParamReader& p, const std::string& name) {
  std::vector<int> s = p.get_int_list("shape", 3, 1, 65536);
  return std::make_unique<Input>(name, Shape{0, s[0], s[1], s[2]});
}

}  // namespace trainer
