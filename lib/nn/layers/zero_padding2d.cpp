// ZeroPadding2D (keras.layers.ZeroPadding2D): adds rows and columns of zeros
// at the edges,
//   x [N, H, W, C] -> y [N, top + H + bottom, left + W + right, C],
//   y[n, top + i, left + j, c] = x[n, i, j, c], 0 elsewhere.
// YAML: {type: ZeroPadding2D, padding: [[top, bottom], [left, right]]}, as
// Keras: an integer, [height, width] or [[top, bottom], [left, right]];
// default 1 on every side. The inverse of Cropping2D, so it runs on the same
// backend op the other way round: forward is crop_backward, backward
// crop_forward.
#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/data_format.h"
#include "nn/layers/border_common.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class ZeroPadding2D : public Layer {
 public:
  ZeroPadding2D(std::string name, Crop2DParams p) : Layer(std::move(name)), p_(p) {}
  std::string type() const override { return "ZeroPadding2D"; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::ZeroPadding2D;
    d.pad_h = PadPair{p_.top, p_.bottom};
    d.pad_w = PadPair{p_.left, p_.right};
    return d;
  }
  /// Pad, constant: its pads are the starts of N, C, H, W, then their ends.
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const LayerDescription d = describe();
    const PadPair h = d.pad_h, w = d.pad_w;
    const std::string pads = g.int_constant(io.name + "/pads", {0, 0, h.before, w.before, 0, 0, h.after, w.after});
    g.node("Pad", {io.ins[0], pads}, io.out, io.name).text("mode", "constant");
  }
  bool passes_values() const override { return true; }

  /// One input [H, W, C] -> [top + H + bottom, left + W + right, C]. UserError
  /// for another input count or a side over the size limit.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("ZeroPadding2D takes exactly 1 input, got " + std::to_string(inputs.size()));
    const Shape& s = inputs[0];
    return Shape{s.n, checked_side((long long)s.h + p_.top + p_.bottom),
                 checked_side((long long)s.w + p_.left + p_.right), s.c};
  }

  /// Copies values: any type, the same for the input and y.
  DTypeSupport dtype_support() const override { return DTypeSupport::Uniform; }

  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Shape s = x[0]->shape();
    const Shape ys{s.n, s.h + p_.top + p_.bottom, s.w + p_.left + p_.right, s.c};
    y.resize(ys);
    require_type(*x[0], y.dtype());
    crop_backward(ctx.device, y.dtype(), x[0]->raw(), ys, p_, y.raw());
  }

  /// Reads only its inputs' shapes.
  BackwardReads backward_reads() const override { return {false, false}; }
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    dx[0]->resize(x[0]->shape());
    require_type(*dx[0], dy.dtype());
    crop_forward(ctx.device, dy.dtype(), dy.raw(), dy.shape(), p_, dx[0]->raw());
  }

 private:
  Crop2DParams p_;
};

}  // namespace

std::unique_ptr<Layer> make_zero_padding2d(ParamReader& p, const std::string& name) {
  read_data_format(p);
  return std::make_unique<ZeroPadding2D>(name, read_border(p, "padding", 1));
}

}  // namespace trainer
