// Reshape (Keras): x [N, H, W, C] -> y [N, target_shape], the same elements
// in the same (row-major) order. target_shape has 3 entries (h, w, c) or 1
// (k: Keras's [N, k], held as [N, 1, 1, k]); one entry may be -1, inferred
// from the others. y is a copy of x.
#include <algorithm>
#include <climits>

#include "config/params.h"
#include "core/buffer.h"
#include "core/error.h"
#include "nn/onnx_graph.h"
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
  /// Keras reshapes in NHWC order: Transpose to NHWC, Reshape, back to NCHW;
  /// a plain Reshape where NCHW gives the same result: the channels are kept
  /// (only the pixels are regrouped), or both shapes have one layout (1
  /// channel or 1x1 pixels: NCHW and NHWC then order the elements alike).
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const Shape &from = in_, &to = out_;
    const std::string& name = io.name;
    auto one_layout = [](const Shape& s) { return s.c == 1 || (s.h == 1 && s.w == 1); };
    if (from.c == to.c || (one_layout(from) && one_layout(to))) {
      g.node("Reshape", {io.ins[0], g.int_constant(name + "/shape", {0, to.c, to.h, to.w})}, io.out, name);
      return;
    }
    g.node("Transpose", io.ins, name + "/nhwc", name + "/to_nhwc").ints("perm", {0, 2, 3, 1});
    g.node("Reshape", {name + "/nhwc", g.int_constant(name + "/shape", {0, to.h, to.w, to.c})}, name + "/reshaped",
           name);
    g.node("Transpose", {name + "/reshaped"}, io.out, name + "/to_nchw").ints("perm", {0, 3, 1, 2});
  }
  bool passes_values() const override { return true; }

  /// target_shape with its -1 filled in. UserError when the number of inputs
  /// is not 1 or the sizes do not hold the input's H*W*C values.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1) throw UserError("Reshape takes one input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
    const long long total = (long long)in_.sample_numel();
    const std::string holds = "the input's " + std::to_string(total) + " values (" + in_.hwc() + ")";
    long long known = 1;  // the product of the given sizes, kept <= total so that it cannot overflow
    for (int v : target_)
      if (v > 0) {
        if (v > total || known * v > total)
          throw UserError("target_shape " + text(target_) + " holds more values than " + holds +
                          "; give sizes whose product is " + std::to_string(total) + ", or -1 for one of them");
        known *= v;
      }
    const bool infer_one = std::count(target_.begin(), target_.end(), -1) == 1;
    if (infer_one && total % known != 0)
      throw UserError("target_shape " + text(target_) + ": the other sizes' product, " + std::to_string(known) +
                      ", does not divide " + holds + "; change them so that it does");
    if (!infer_one && known != total)
      throw UserError("target_shape " + text(target_) + " holds " + std::to_string(known) + " values, not " + holds +
                      "; give sizes whose product is " + std::to_string(total) + ", or -1 for one of them");
    std::vector<long long> dims(target_.begin(), target_.end());
    for (long long& v : dims)
      if (v < 0) v = total / known;
    const long long c = dims.back();
    if (c > INT_MAX)  // total < 2^31 (the model's limit), so only the one-entry form can get here
      throw UserError("target_shape " + text(target_) + " gives " + std::to_string(c) + " channels, more than " +
                      std::to_string(INT_MAX) + "; spread the values over a height and width ([h, w, c])");
    if (dims.size() == 3)
      for (size_t i = 0; i < 2; ++i)
        if (dims[i] > kMaxSide)
          throw UserError("target_shape " + text(target_) + " gives " + std::to_string(dims[i]) + " pixels " +
                          (i == 0 ? "high" : "wide") + ", more than " + std::to_string(kMaxSide) +
                          "; spread the values over the other sizes");
    out_ = dims.size() == 1 ? Shape{in_.n, 1, 1, int(c)} : Shape{in_.n, int(dims[0]), int(dims[1]), int(c)};
    return out_;
  }

  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Tensor& xt = *x[0];
    require_sample_shape(xt.shape(), in_);
    y.resize(out_.with_batch(xt.shape().n));
    device_copy(ctx.device, y.raw(), ctx.device, xt.raw(), xt.bytes());
  }

  /// Reads only its inputs' shapes.
  BackwardReads backward_reads() const override { return {false, false}; }
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    dx[0]->resize(x[0]->shape());
    device_copy(ctx.device, dx[0]->raw(), ctx.device, dy.raw(), dy.bytes());
  }

  /// Keras's [N, k] for a target_shape of one size.
  bool flat_output(bool) const override { return target_.size() == 1; }

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
  if (!p.has("target_shape"))
    p.fail(std::string("'target_shape' is required: the per-sample shape, e.g. [1, 1, 64]") +
           (p.has("shape") ? " (Keras's Reshape calls it target_shape, not shape)" : ""));
  const YAML::Node node = p.get_node("target_shape");
  const std::string want = "must be a list of 3 sizes [h, w, c] or of 1 [k] (Keras's [N, k]), each >= 1, or -1 "
                           "for one size to infer";
  const std::string got = YAML::Dump(node);
  if (!node.IsSequence()) p.fail("target_shape", want + ", got " + got + python_tuple_hint(got));
  if (node.size() > 0 && (node[0].IsNull() || (node[0].IsScalar() && node[0].Scalar() == "None"))) {
    YAML::Node rest(YAML::NodeType::Sequence);
    rest.SetStyle(YAML::EmitterStyle::Flow);
    for (size_t i = 1; i < node.size(); ++i) rest.push_back(node[i]);
    p.fail("target_shape", want + ", got " + got + " (leave out Keras's batch dimension: " + YAML::Dump(rest) + ")");
  }
  if (node.size() != 1 && node.size() != 3)
    p.fail("target_shape", want + ", got " + got +
                               (node.size() == 2 ? "; a 2-entry target (a 3-D tensor in Keras) has no [N, H, W, C] "
                                                   "form here"
                                                 : ""));
  std::vector<int> target = p.get_int_list("target_shape", node.size(), -1, 1 << 30);
  int inferred = 0;
  for (int v : target) {
    if (v == 0) p.fail("target_shape", "has a 0 entry; sizes are >= 1, or -1 for the one inferred");
    inferred += v < 0;
  }
  if (inferred > 1) p.fail("target_shape", "has more than one -1; at most one size can be inferred");
  return std::make_unique<Reshape>(name, std::move(target));
}

}  // namespace trainer
