// Rescaling (keras.layers.Rescaling): y = x * scale + offset, element-wise.
// YAML: {type: Rescaling, scale: 0.00392156862745098, offset: 0.0}
// scale is required, offset defaults to 0 (Keras defaults). No weights.
#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class Rescaling : public Layer {
 public:
  Rescaling(std::string name, float scale, float offset)
      : Layer(std::move(name)), scale_(scale), offset_(offset) {}
  std::string type() const override { return "Rescaling"; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::Rescaling;
    d.scale = scale_;
    d.offset = offset_;
    return d;
  }
  /// Mul by the scale, then Add of the offset when it is not 0.
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const std::string scale = g.constant(io.name + "/scale", {1}, {scale_});
    if (offset_ == 0.f) {
      g.node("Mul", {io.ins[0], scale}, io.out, io.name + "/mul");
      return;
    }
    const std::string offset = g.constant(io.name + "/offset", {1}, {offset_});
    g.node("Mul", {io.ins[0], scale}, io.name + "/scaled", io.name + "/mul");
    g.node("Add", {io.name + "/scaled", offset}, io.out, io.name + "/add");
  }

  /// One input of any shape; the output has the same shape. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("Rescaling takes exactly 1 input, got " + std::to_string(inputs.size()));
    return inputs[0];
  }
  /// y [N, H, W, C] = x [N, H, W, C] * scale + offset.
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    y.resize(x[0]->shape());
    scale_shift_forward(ctx.device, x[0]->data(), scale_, offset_, y.data(), y.numel());
  }
  /// Reads only its inputs' shapes.
  BackwardReads backward_reads() const override { return {false, false}; }
  /// dx = dy * scale.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    dx[0]->resize(x[0]->shape());
    scale_backward(ctx.device, dy.data(), scale_, dx[0]->data(), dy.numel());
  }

 private:
  float scale_, offset_;
};

}  // namespace

std::unique_ptr<Layer> make_rescaling(ParamReader& p, const std::string& name) {
  double scale = p.get_double("scale", std::nullopt);
  double offset = p.get_double("offset", 0.0);
  return std::make_unique<Rescaling>(name, float(scale), float(offset));
}

}  // namespace trainer
