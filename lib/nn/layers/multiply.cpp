// Multiply (keras.layers.Multiply): y = x_0 * x_1, element-wise, for two
// inputs [N, H, W, C] of the same shape, or one of them [N, H, W, 1] broadcast
// over the other's channels (as Keras broadcasts, and as attention gates
// (Oktay et al. 2018) multiply features by a one-channel map). No keys, no
// weights.
#include "backend/elementwise_ops.h"
#include "core/error.h"
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
    if (narrow_c_ != wide_c_) d.broadcast_input = 1 - wide_, d.channels = wide_c_;
    return d;
  }

  /// The wider input's shape. UserError unless there are 2 inputs of the same
  /// height and width whose channels are equal or 1 for one of them.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 2)
      throw UserError("Multiply takes 2 inputs here, got " + std::to_string(inputs.size()) +
                      (inputs.size() > 2 ? "; chain Multiply layers for more" : ""));
    const Shape &a = inputs[0], &b = inputs[1];
    const bool per_channel = (a.h == 1 && a.w == 1) != (b.h == 1 && b.w == 1);  // [1, 1, C]: a squeeze-excitation scale
    if (a.h != b.h || a.w != b.w || (a.c != b.c && a.c != 1 && b.c != 1))
      throw UserError("Multiply needs inputs of the same shape, or one with 1 channel (broadcast over the "
                      "other's); got " + a.hwc() + " and " + b.hwc() +
                      (per_channel ? "; broadcasting a [1, 1, C] input over height and width is not supported"
                                   : a.h != b.h || a.w != b.w ? kMergeSizeHint : ""));
    wide_ = a.c >= b.c ? 0 : 1;
    wide_c_ = inputs[size_t(wide_)].c, narrow_c_ = inputs[size_t(1 - wide_)].c;
    return inputs[size_t(wide_)];
  }

  /// y = wide * narrow (narrow: the other input, with the same or 1 channel).
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Tensor &a = *x[size_t(wide_)], &b = *x[size_t(1 - wide_)];
    const Shape s = a.shape();
    y.resize(s);
    multiply_forward(ctx.device, a.data(), b.data(), b.shape().c, pixels(s), s.c, y.data());
  }

  /// d(wide) = dy * narrow; d(narrow) = dy * wide, summed over the channels
  /// when narrow has one.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    const Tensor &a = *x[size_t(wide_)], &b = *x[size_t(1 - wide_)];
    Tensor *da = dx[size_t(wide_)], *db = dx[size_t(1 - wide_)];
    if (da) da->resize(a.shape());
    if (db) db->resize(b.shape());
    const Shape s = a.shape();
    multiply_backward(ctx.device, a.data(), b.data(), b.shape().c, pixels(s), s.c, dy.data(),
                      da ? da->data() : nullptr, db ? db->data() : nullptr);
  }

 private:
  static long long pixels(const Shape& s) { return (long long)s.n * s.h * s.w; }
  int wide_ = 0;  ///< The input with every channel (0 when both have them).
  int wide_c_ = 0, narrow_c_ = 0;  ///< Their channels, from infer().
};

}  // namespace

std::unique_ptr<Layer> make_multiply(ParamReader&, const std::string& name) {
  return std::make_unique<Multiply>(name);
}

}  // namespace trainer
