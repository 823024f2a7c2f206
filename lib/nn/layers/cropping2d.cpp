// Cropping2D (keras.layers.Cropping2D): removes rows and columns at the edges,
//   x [N, H, W, C] -> y [N, H - top - bottom, W - left - right, C],
//   y[n, i, j, c] = x[n, top + i, left + j, c].
// YAML: {type: Cropping2D, cropping: [[top, bottom], [left, right]]}, as Keras:
// an integer (all four sides), [height, width] (symmetric) or
// [[top, bottom], [left, right]]; default no cropping. Backward puts dy back
// in the window and 0 in the cropped border. The skip connections of a U-Net
// with 'valid' padding (Ronneberger et al. 2015) crop the encoder's features to
// the decoder's size this way.
#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/data_format.h"
#include "nn/layers/border_common.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class Cropping2D : public Layer {
 public:
  Cropping2D(std::string name, Crop2DParams p) : Layer(std::move(name)), p_(p) {}
  std::string type() const override { return "Cropping2D"; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::Cropping2D;
    d.pad_h = PadPair{p_.top, p_.bottom};
    d.pad_w = PadPair{p_.left, p_.right};
    return d;
  }
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const LayerDescription d = describe();
    g.crop(io.ins[0], d.pad_h, d.pad_w, io.out, io.name);
  }
  bool passes_values() const override { return true; }

  /// One input [H, W, C] -> [H - top - bottom, W - left - right, C].
  /// UserError for another input count or when nothing would be left.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("Cropping2D takes exactly 1 input, got " + std::to_string(inputs.size()));
    const Shape& s = inputs[0];
    const long long h = (long long)s.h - p_.top - p_.bottom, w = (long long)s.w - p_.left - p_.right;
    if (h < 1 || w < 1)
      throw UserError("Cropping2D removes " + std::to_string(p_.top + p_.bottom) + " rows and " +
                      std::to_string(p_.left + p_.right) + " columns of its input " + s.hwc() +
                      ", which leaves nothing; lower 'cropping'");
    return Shape{s.n, int(h), int(w), s.c};
  }

  /// Copies values: any type, the same for the input and y.
  DTypeSupport dtype_support() const override { return DTypeSupport::Uniform; }

  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Shape s = x[0]->shape();
    y.resize(Shape{s.n, s.h - p_.top - p_.bottom, s.w - p_.left - p_.right, s.c});
    require_type(*x[0], y.dtype());
    crop_forward(ctx.device, y.dtype(), x[0]->raw(), s, p_, y.raw());
  }

  /// Reads only its inputs' shapes.
  BackwardReads backward_reads() const override { return {false, false}; }
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    dx[0]->resize(x[0]->shape());
    require_type(*dx[0], dy.dtype());
    crop_backward(ctx.device, dy.dtype(), dy.raw(), x[0]->shape(), p_, dx[0]->raw());
  }

 private:
  Crop2DParams p_;
};

}  // namespace

std::unique_ptr<Layer> make_cropping2d(ParamReader& p, const std::string& name) {
  read_data_format(p);
  return std::make_unique<Cropping2D>(name, read_border(p, "cropping", 0));
}

}  // namespace trainer
