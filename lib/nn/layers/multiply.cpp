// Multiply (keras.layers.Multiply): y = x_0 * x_1, element-wise, for two
// inputs [N, H, W, C] of the same shape, or one of them broadcast over the
// other as Keras broadcasts: [N, H, W, 1], one value per pixel for every
// channel (attention gates, Oktay et al. 2018, multiply features by a
// one-channel map), or [N, 1, 1, C], one value per channel for every pixel
// (squeeze-and-excitation, Hu et al. 2018: a GlobalAveragePooling2D's [N, C]
// through Dense layers), or [N, 1, 1, 1], one value per sample. No keys, no
// weights.
#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class Multiply : public Layer {
 public:
  explicit Multiply(std::string name) : Layer(std::move(name)) {}
  std::string type() const override { return "Multiply"; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::Multiply;
    if (mode_ != Mode::Same) d.broadcast_input = 1 - wide_;
    d.input = narrow_, d.output = out_;
    return d;
  }
  /// Mul, the narrow input broadcast first (OnnxGraph::broadcast).
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const LayerDescription d = describe();
    std::vector<std::string> factors{io.ins[0], io.ins[1]};
    if (d.broadcast_input >= 0) {
      std::string& narrow = factors[size_t(d.broadcast_input)];
      narrow = g.broadcast(narrow, d.input, d.output, io.name);
    }
    g.node("Mul", factors, io.out, io.name);
  }

  /// The wider input's shape. UserError unless there are 2 inputs of the same
  /// shape, or one of them has the other's height and width and 1 channel, or
  /// 1x1 pixels and the other's channels (or 1).
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 2)
      throw UserError("Multiply takes 2 inputs here, got " + std::to_string(inputs.size()) +
                      (inputs.size() > 2 ? "; chain Multiply layers for more" : ""));
    const Shape &a = inputs[0], &b = inputs[1];
    const bool same_size = a.h == b.h && a.w == b.w;
    const bool pixel_a = a.h == 1 && a.w == 1, pixel_b = b.h == 1 && b.w == 1;
    if (a.same_sample(b)) {
      mode_ = Mode::Same, wide_ = 0;
    } else if (same_size && (a.c == 1 || b.c == 1)) {
      mode_ = Mode::OneChannel, wide_ = a.c == 1 ? 1 : 0;
    } else if (pixel_a != pixel_b && (a.c == b.c || (pixel_a ? a.c : b.c) == 1)) {
      mode_ = Mode::PerChannel, wide_ = pixel_a ? 1 : 0;
    } else {
      const bool both = (pixel_a && b.c == 1) || (pixel_b && a.c == 1);
      throw UserError("Multiply needs inputs of the same shape, or one broadcast over the other: [H, W, 1] (the "
                      "other's height and width, 1 channel) or [1, 1, C] (1x1 pixels, the other's channels or 1); "
                      "got " + a.hwc() + " and " + b.hwc() +
                      (both ? "; broadcasting both inputs to a third shape is not supported (expand one of them "
                              "first, e.g. with a Conv2D to the channels)"
                            : same_size || pixel_a || pixel_b ? std::string() : kMergeSizeHint));
    }
    out_ = inputs[size_t(wide_)], narrow_ = inputs[size_t(1 - wide_)];
    return out_;
  }

  /// y = wide * narrow (narrow: the other input, of the same shape or broadcast).
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Tensor &a = *x[size_t(wide_)], &b = *x[size_t(1 - wide_)];
    const Shape s = a.shape();
    y.resize(s);
    if (mode_ == Mode::PerChannel)
      scale_channels_forward(ctx.device, a.data(), b.data(), broadcast_rows_shape(s, narrow_.c), y.data());
    else
      multiply_forward(ctx.device, a.data(), b.data(), b.shape().c, pixels(s), s.c, y.data());
  }

  /// Reads its inputs, not its output.
  BackwardReads backward_reads() const override { return {true, false}; }
  /// d(wide) = dy * narrow; d(narrow) = dy * wide, summed over what it is
  /// broadcast over (the channels, or the pixels).
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    const Tensor &a = *x[size_t(wide_)], &b = *x[size_t(1 - wide_)];
    Tensor *da = dx[size_t(wide_)], *db = dx[size_t(1 - wide_)];
    if (da) da->resize(a.shape());
    if (db) db->resize(b.shape());
    const Shape s = a.shape();
    if (mode_ == Mode::PerChannel)
      scale_channels_backward(ctx.device, a.data(), b.data(), broadcast_rows_shape(s, narrow_.c), dy.data(),
                              da ? da->data() : nullptr, db ? db->data() : nullptr);
    else
      multiply_backward(ctx.device, a.data(), b.data(), b.shape().c, pixels(s), s.c, dy.data(),
                        da ? da->data() : nullptr, db ? db->data() : nullptr);
  }

 private:
  /// How the narrow input meets the wide one.
  enum class Mode { Same, OneChannel, PerChannel };
  static long long pixels(const Shape& s) { return (long long)s.n * s.h * s.w; }
  Mode mode_ = Mode::Same;
  int wide_ = 0;  ///< The input of the output's shape (0 when both have it).
  Shape out_, narrow_;  ///< Per-sample shapes of the output and the other input, from infer().
};

}  // namespace

std::unique_ptr<Layer> make_multiply(ParamReader&, const std::string& name) {
  return std::make_unique<Multiply>(name);
}

}  // namespace trainer
