// PReLU (keras.layers.PReLU, He et al. 2015): y = x for x > 0, else alpha * x,
// with a learned slope alpha [ah, aw, ac] (Keras's layout: the input's
// [H, W, C], with 1 on each axis of shared_axes). YAML: {type: PReLU,
// alpha_initializer: zeros, alpha_regularizer: null, shared_axes: [1, 2]}.
#include <set>

#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/initializers.h"
#include "nn/layer.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"
#include "nn/regularizer.h"
#include "config/params.h"

namespace trainer {

namespace {

class PReLU final : public Layer {
 public:
  PReLU(std::string name, std::string init, Regularizer reg, std::set<int> shared)
      : Layer(std::move(name)), init_(std::move(init)), reg_(reg), shared_(std::move(shared)) {}
  std::string type() const override { return "PReLU"; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::PReLU;
    return d;
  }
  /// PRelu, Keras's alpha [ah, aw, ac] as ONNX's slope [ac, ah, aw], broadcast over N, C, H, W.
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const WeightRecord& alpha = io.weight("alpha");
    const int ah = alpha.shape[0], aw = alpha.shape[1], ac = alpha.shape[2];
    std::vector<float> slope(alpha.values.size());
    for (int c = 0; c < ac; ++c)
      for (int h = 0; h < ah; ++h)
        for (int x = 0; x < aw; ++x) slope[(size_t(c) * ah + h) * aw + x] = alpha.values[(size_t(h) * aw + x) * ac + c];
    g.node("PRelu", {io.ins[0], g.constant(io.name + "/slope", {ac, ah, aw}, slope)}, io.out, io.name);
  }

  /// One input; the same shape out. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1) throw UserError("PReLU takes exactly 1 input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
    a_ = PReLUShape{shared_.count(1) ? 1 : in_.h, shared_.count(2) ? 1 : in_.w, shared_.count(3) ? 1 : in_.c};
    return in_;
  }

  /// alpha [ah, aw, ac] with Keras's fans of that shape (receptive = ah,
  /// fan_in = aw * ah, fan_out = ac * ah) and its regularizer.
  std::vector<ParamSpec> param_specs() const override {
    return {ParamSpec{"alpha", {a_.ah, a_.aw, a_.ac}, init_, double(a_.aw) * a_.ah, double(a_.ac) * a_.ah, true,
                      reg_}};
  }
  void bind(const std::vector<float*>& params, const std::vector<float*>& grads) override {
    alpha_ = params[0], dalpha_ = grads[0];
  }

  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    y.resize(x[0]->shape());
    prelu_forward(ctx.device, x[0]->data(), x[0]->shape(), alpha_, a_, y.data());
  }

  /// Reads its inputs, not its output.
  BackwardReads backward_reads() const override { return {true, false}; }
  /// dx = dy where x > 0, else alpha * dy; dalpha = the sum of dy * min(x, 0)
  /// over every element that uses the slope.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (dx[0]) dx[0]->resize(x[0]->shape());
    prelu_backward(ctx.device, x[0]->data(), x[0]->shape(), alpha_, a_, dy.data(), dx[0] ? dx[0]->data() : nullptr,
                   dalpha_);
  }

 private:
  std::string init_;
  Regularizer reg_;
  std::set<int> shared_;  ///< Keras's shared_axes: 1 (H), 2 (W), 3 (C).
  Shape in_;
  PReLUShape a_;
  float *alpha_ = nullptr, *dalpha_ = nullptr;
};

}  // namespace

std::unique_ptr<Layer> make_prelu(ParamReader& p, const std::string& name) {
  const std::string init = p.get_string("alpha_initializer", std::string("zeros"), initializer_names());
  const Regularizer reg = read_regularizer(p, "alpha_regularizer");
  std::set<int> shared;
  if (p.given("shared_axes")) {
    const YAML::Node axes = p.get_node("shared_axes");
    if (!axes.IsScalar() && !axes.IsSequence())
      p.fail("shared_axes", "must be an axis in [1, 3] (1: H, 2: W, 3: C) or a list of them");
    const std::vector<int> list =
        axes.IsScalar() ? std::vector<int>{p.get_int("shared_axes", std::nullopt, 1, 3)}
                        : p.get_int_list("shared_axes", axes.IsSequence() ? axes.size() : 0, 1, 3);
    for (int a : list)
      if (!shared.insert(a).second) p.fail("shared_axes", "names axis " + std::to_string(a) + " twice");
  }
  p.skip("shared_axes");
  return std::make_unique<PReLU>(name, init, reg, shared);
}

}  // namespace trainer
