// Concatenate (keras.layers.Concatenate) along the channel axis:
//   inputs [N, H, W, C_k], k = 0..K-1 (K >= 2)  ->  y [N, H, W, sum_k C_k],
// channels in input order. YAML: {type: Concatenate, axis: -1} (only -1 or 3,
// the channel axis of NHWC, are accepted).
#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class Concatenate : public Layer {
 public:
  explicit Concatenate(std::string name) : Layer(std::move(name)) {}
  std::string type() const override { return "Concatenate"; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::Concatenate;
    return d;
  }
  /// Concat on axis 1, the channels of NCHW.
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    g.node("Concat", io.ins, io.out, io.name).integer("axis", 1);
  }

  /// UserError unless there are >= 2 inputs with the same H and W (the message
  /// names both shapes).
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() < 2)
      throw UserError("Concatenate needs at least 2 inputs, got " + std::to_string(inputs.size()));
    Shape out = inputs[0];
    out.c = 0;
    for (const Shape& s : inputs) {
      if (s.h != inputs[0].h || s.w != inputs[0].w)
        throw UserError("Concatenate needs inputs of the same height and width; got " + inputs[0].hwc() +
                        " and " + s.hwc() + kMergeSizeHint);
      out.c += s.c;
    }
    return out;
  }

  /// Copies values: any type, the same for the inputs and y.
  DTypeSupport dtype_support() const override { return DTypeSupport::Uniform; }

  /// Per pixel, copies each input's channels into its slice of y (backend).
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    Shape s = x[0]->shape();
    s.c = 0;
    for (const Tensor* t : x) s.c += t->shape().c;
    y.resize(s);
    channels_of(x);
    in_.resize(x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      require_type(*x[k], y.dtype());
      in_[k] = x[k]->raw();
    }
    concat_channels_forward(ctx.device, y.dtype(), in_.data(), cs_.data(), x.size(), (long long)s.n * s.h * s.w,
                            y.raw(), s.c);
  }

  /// Reads only its inputs' shapes.
  BackwardReads backward_reads() const override { return {false, false}; }
  /// dx[k] = the k-th channel slice of dy (backend).
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    for (size_t k = 0; k < x.size(); ++k)
      if (dx[k]) dx[k]->resize(x[k]->shape());
    const Shape s = dy.shape();
    channels_of(x);
    out_.resize(x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      if (dx[k]) require_type(*dx[k], dy.dtype());
      out_[k] = dx[k] ? dx[k]->raw() : nullptr;
    }
    concat_channels_backward(ctx.device, dy.dtype(), dy.raw(), s.c, (long long)s.n * s.h * s.w, cs_.data(), x.size(),
                             out_.data());
  }

 private:
  /// cs_ <- the inputs' channel counts.
  void channels_of(const std::vector<const Tensor*>& x) {
    cs_.resize(x.size());
    for (size_t k = 0; k < x.size(); ++k) cs_[k] = x[k]->shape().c;
  }

  std::vector<int> cs_;             ///< Channels per input, reused across steps.
  std::vector<const void*> in_;     ///< Input pointers (forward).
  std::vector<void*> out_;          ///< Gradient pointers (backward; nullptr: not needed).
};

}  // namespace

std::unique_ptr<Layer> make_concatenate(ParamReader& p, const std::string& name) {
  int axis = p.get_int("axis", -1);
  if (axis != -1 && axis != 3)
    p.fail("axis", "must be -1 (or 3): trainer concatenates along the channel axis only");
  return std::make_unique<Concatenate>(name);
}

}  // namespace trainer
