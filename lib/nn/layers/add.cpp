// Add (keras.layers.Add): y = x_0 + x_1 + ... + x_{K-1}, K >= 2 inputs of the
// same shape [N, H, W, C], any of which may instead be [N, 1, 1, C] or
// [N, 1, 1, 1], broadcast over the others' pixels (and channels) as Keras
// broadcasts (a global pooling's [N, C] through Dense layers, added back to
// the features). No keys, no weights.
#include "backend/elementwise_ops.h"
#include "core/buffer.h"
#include "core/error.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class Add : public Layer {
 public:
  explicit Add(std::string name) : Layer(std::move(name)) {}
  std::string type() const override { return "Add"; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::Add;
    d.input_shapes = in_;
    d.output = out_;
    return d;
  }
  /// Add, chained for more inputs, each input of another shape broadcast first (OnnxGraph::broadcast).
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const LayerDescription d = describe();
    std::vector<std::string> terms = io.ins;
    for (size_t k = 0; k < terms.size(); ++k)
      if (!d.input_shapes[k].same_sample(d.output))
        terms[k] = g.broadcast(terms[k], d.input_shapes[k], d.output, io.name + "/" + std::to_string(k));
    std::string sum = terms[0];
    for (size_t k = 1; k < terms.size(); ++k) {
      const std::string next = k + 1 == terms.size() ? io.out : io.name + "/sum" + std::to_string(k);
      g.node("Add", {sum, terms[k]}, next, io.name + "/add" + std::to_string(k));
      sum = next;
    }
  }

  /// The full shape (the largest input). UserError unless there are >= 2
  /// inputs, each of that shape or 1x1 pixels of its channels (or 1).
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() < 2)
      throw UserError("Add needs at least 2 inputs, got " + std::to_string(inputs.size()));
    out_ = inputs[0];
    for (const Shape& s : inputs)
      if (s.sample_numel() > out_.sample_numel()) out_ = s;
    for (const Shape& s : inputs) {
      if (s.same_sample(out_) || broadcast(s)) continue;
      std::string got;
      for (const Shape& t : inputs) got += (got.empty() ? "" : " and ") + t.hwc();
      throw UserError("Add needs inputs of the same shape, or [1, 1, C] / [1, 1, 1] ones broadcast over the "
                      "others' pixels; got " + got + (s.h != out_.h || s.w != out_.w ? kMergeSizeHint : ""));
    }
    in_ = inputs;
    return out_;
  }

  /// y = the full inputs' sum (in input order), then each broadcast input added in turn.
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Shape s = out_.with_batch(x[0]->shape().n);
    y.resize(s);
    ptrs_.clear();
    for (size_t k = 0; k < x.size(); ++k)
      if (!broadcast(in_[k])) ptrs_.push_back(x[k]->data());
    if (ptrs_.size() == 1)
      device_copy(ctx.device, y.data(), ctx.device, ptrs_[0], s.numel() * sizeof(float));
    else
      add_forward(ctx.device, ptrs_.data(), ptrs_.size(), y.data(), y.numel());
    for (size_t k = 0; k < x.size(); ++k)
      if (broadcast(in_[k])) add_channels_forward(ctx.device, y.data(), x[k]->data(), broadcast_rows_shape(s, in_[k].c), y.data());
  }

  /// Reads only its inputs' shapes.
  BackwardReads backward_reads() const override { return {false, false}; }
  /// dx[k] = dy for a full input; a broadcast one's sum of dy over what it is broadcast over.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    for (size_t k = 0; k < x.size(); ++k) {
      if (!dx[k]) continue;
      if (!broadcast(in_[k])) {
        *dx[k] = dy;
        continue;
      }
      dx[k]->resize(x[k]->shape());
      channel_sums(ctx.device, dy.data(), broadcast_rows_shape(dy.shape(), in_[k].c), dx[k]->data());
    }
  }

 private:
  /// Whether input shape s is broadcast over the full shape: 1x1 pixels of its channels, or one value.
  bool broadcast(const Shape& s) const {
    return !s.same_sample(out_) && s.h == 1 && s.w == 1 && (s.c == out_.c || s.c == 1);
  }
  std::vector<Shape> in_;           ///< Per-sample input shapes, from infer().
  Shape out_;                       ///< Per-sample output shape, from infer().
  std::vector<const float*> ptrs_;  ///< The full inputs' pointers, reused across steps.
};

}  // namespace

std::unique_ptr<Layer> make_add(ParamReader&, const std::string& name) {
  return std::make_unique<Add>(name);
}

}  // namespace trainer
