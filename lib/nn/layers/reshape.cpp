// Reshape (Keras): x [N, H, W, C] -> y [N, target_shape], the same elements
// in the same (row-major) order. target_shape has 3 entries (h, w, c) or 1
// (k: Keras's [N, k], held as [N, 1, 1, k]); one entry may be -1, inferred
// from the others. y is a copy of x.
#include "config/params.h"
#include "core/buffer.h"
#include "core/error.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class Reshape final : public Layer {
 public:
  Reshape(std::string name, std::vector<int> target) : Layer(std::move(name)), target_(std::move(target)) {}
  std::string type() const override { return "Reshape"; }
  /// The per-sample shapes before and after.
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::Reshape;
    d.input = in_, d.output = out_;
    return d;
  }

  /// target_shape with its -1 filled in. UserError when the number of inputs
  /// is not 1 or the sizes do not hold H*W*C elements.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1) throw UserError("Reshape takes one input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
    const long long total = (long long)in_.sample_numel();
    long long known = 1;
    for (int v : target_)
      if (v > 0) known *= v;
    std::vector<long long> dims(target_.begin(), target_.end());
    for (long long& v : dims)
      if (v < 0) v = known > 0 && total % known == 0 ? total / known : 0;
    const long long product = dims.size() == 3 ? dims[0] * dims[1] * dims[2] : dims[0];
    if (product != total)
      throw UserError("target_shape " + text(target_) + " does not hold the input's " + std::to_string(total) +
                      " values (" + in_.hwc() + "); give sizes whose product is " + std::to_string(total) +
                      ", or -1 for one of them");
    out_ = dims.size() == 3 ? Shape{in_.n, int(dims[0]), int(dims[1]), int(dims[2])}
                            : Shape{in_.n, 1, 1, int(dims[0])};
    return out_;
  }

  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Tensor& xt = *x[0];
    if (!xt.shape().same_sample(in_))
      throw InternalError("layer '" + name() + "': input " + xt.shape().hwc() + " but inferred " + in_.hwc());
    y.resize(out_.with_batch(xt.shape().n));
    device_copy(ctx.device, y.raw(), ctx.device, xt.raw(), xt.bytes());
  }

  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    dx[0]->resize(x[0]->shape());
    device_copy(ctx.device, dx[0]->raw(), ctx.device, dy.raw(), dy.bytes());
  }

  /// "[a, b, c]".
  static std::string text(const std::vector<int>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  }

 private:
  std::vector<int> target_;  ///< target_shape as written (-1: inferred).
  Shape in_, out_;           ///< Per-sample shapes from infer().
};

}  // namespace

std::unique_ptr<Layer> make_reshape(ParamReader& p, const std::string& name) {
  const YAML::Node node = p.get_node("target_shape");
  if (!node) p.fail("target_shape", "is required: the per-sample shape, e.g. [1, 1, 64]");
  // Entries after a leading null (Keras's batch dimension, which get_int_list names).
  const size_t size = node.IsSequence() ? node.size() : 0;
  const bool batch = size > 0 && (node[0].IsNull() || (node[0].IsScalar() && node[0].Scalar() == "None"));
  const size_t entries = size - (batch ? 1 : 0);
  if (entries == 2 && !batch)
    p.fail("target_shape", "has 2 entries; tensors here are [N, H, W, C], so give 3 ([h, w, c]) or 1 ([k], "
                           "Keras's [N, k])");
  const size_t len = entries == 1 ? 1 : 3;
  std::vector<int> target = p.get_int_list("target_shape", len, -1, 1 << 30);
  int inferred = 0;
  for (int v : target) {
    if (v == 0) p.fail("target_shape", "has a 0 entry; sizes are >= 1, or -1 for the one inferred");
    inferred += v < 0;
  }
  if (inferred > 1) p.fail("target_shape", "has more than one -1; at most one size can be inferred");
  return std::make_unique<Reshape>(name, std::move(target));
}

}  // namespace trainer
