// Add (keras.layers.Add): y = x_0 + x_1 + ... + x_{K-1}, K >= 2 inputs of the
// same shape [N, H, W, C]. No keys, no weights.
#include "backend/elementwise_ops.h"
#include "core/error.h"
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
    return d;
  }

  /// UserError unless there are >= 2 inputs of identical shape (names both shapes).
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() < 2)
      throw UserError("Add needs at least 2 inputs, got " + std::to_string(inputs.size()));
    for (const Shape& s : inputs)
      if (!s.same_sample(inputs[0])) {
        const bool pixel = ((s.h == 1 && s.w == 1) != (inputs[0].h == 1 && inputs[0].w == 1)) &&
                           (s.c == inputs[0].c || s.c == 1 || inputs[0].c == 1);  // what Keras would broadcast
        throw UserError("Add needs inputs of the same shape; got " + inputs[0].hwc() + " and " + s.hwc() +
                        (pixel ? "; Add does not broadcast a 1x1 input over height and width here (Keras would): "
                                 "add the inputs before a global pooling, or use Multiply, which does"
                         : s.h != inputs[0].h || s.w != inputs[0].w ? kMergeSizeHint
                                                                    : ""));
      }
    return inputs[0];
  }

  /// y = x_0 + x_1 + ... (added in input order by the backend).
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    y.resize(x[0]->shape());
    ptrs_.resize(x.size());
    for (size_t k = 0; k < x.size(); ++k) ptrs_[k] = x[k]->data();
    add_forward(ctx.device, ptrs_.data(), ptrs_.size(), y.data(), y.numel());
  }

  /// dx[k] = dy for every k.
  void backward(const Context&, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    for (size_t k = 0; k < x.size(); ++k)
      if (dx[k]) *dx[k] = dy;
  }

 private:
  std::vector<const float*> ptrs_;  ///< Input pointers, reused across steps.
};

}  // namespace

std::unique_ptr<Layer> make_add(ParamReader&, const std::string& name) {
  return std::make_unique<Add>(name);
}

}  // namespace trainer
