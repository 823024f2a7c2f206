// GroupNormalization (keras.layers.GroupNormalization; Wu & He 2018) over
// x [N, H, W, C] whose C channels form `groups` groups of C / groups
// consecutive channels:
//   y = gamma[c] * (x - mean) / sqrt(var + epsilon) + beta[c],
// mean and the biased var over each sample's group (H * W * C / groups
// values). The statistics are each sample's own, in training and inference
// alike, so the layer keeps no moving statistics, needs no communication
// between towers, and N towers compute what one does whatever the batch split:
// the usual replacement of BatchNormalization when a tower's batch is small.
// groups: 1 normalises each sample over all its values (LayerNormalization
// over H, W and C); groups: C each channel alone (InstanceNormalization).
// Weights, backward and the shared keys: norm_common.h; the ops:
// group_norm_* (backend/elementwise_ops.h).
//
// YAML keys (Keras 3's names and defaults): groups: 32 (-1: one group per
// channel, as Keras 3 reads it), axis: -1 (or 3, or a one-element list of
// either; nothing else), epsilon: 0.001, center: true, scale: true,
// beta_initializer: zeros, gamma_initializer: ones, beta_regularizer and
// gamma_regularizer: none. C must be a multiple of groups (a UserError naming
// the divisors).
#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/layers/norm_common.h"
#include "nn/layers/on_device.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class GroupNormalization : public SampleNormLayer {
 public:
  /// groups as configured: -1 means one group per channel.
  GroupNormalization(std::string name, NormOptions o, int groups)
      : SampleNormLayer(std::move(name), std::move(o)), configured_groups_(groups) {}
  std::string type() const override { return "GroupNormalization"; }
  /// The same computation in inference (gamma and beta absent when scale or center is false).
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::GroupNormalization;
    d.groups = groups_;
    d.epsilon = o_.epsilon;
    d.input = in_;
    return d;
  }
  /// ONNX's GroupNormalization is opset 18: [N, groups, C / groups * H * W]
  /// (NCHW keeps a group's channels together), InstanceNormalization over the
  /// last axis, back to [N, C, H, W], then gamma and beta (channel_affine).
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const LayerDescription d = describe();
    const Shape& s = d.input;
    const int64_t c = s.c, groups = d.groups;
    const std::string& name = io.name;
    g.node("Reshape", {io.ins[0], g.int_constant(name + "/grouped_shape", {0, groups, -1})}, name + "/grouped",
           name + "/group");
    g.node("InstanceNormalization",
           {name + "/grouped", g.constant(name + "/ones", {groups}, std::vector<float>(size_t(groups), 1.f)),
            g.constant(name + "/zeros", {groups}, std::vector<float>(size_t(groups), 0.f))},
           name + "/normalized", name + "/normalize")
        .real("epsilon", float(d.epsilon));
    g.node("Reshape", {name + "/normalized", g.int_constant(name + "/shape", {0, c, s.h, s.w})}, name + "/ungrouped",
           name + "/ungroup");
    g.channel_affine(io.weights, c, name + "/ungrouped", io.out, name);
  }

  /// One input [H, W, C], C a multiple of groups (groups -1 becomes C); same
  /// shape out. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("GroupNormalization takes exactly 1 input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
    const int c = in_.c;
    groups_ = configured_groups_ == -1 ? c : configured_groups_;
    if (c % groups_ != 0) {
      std::string divisors;
      for (int g = 1; g <= c; ++g)
        if (c % g == 0) divisors += (divisors.empty() ? "" : ", ") + std::to_string(g);
      throw UserError("groups " + std::to_string(groups_) + " must divide the input's " + std::to_string(c) +
                      " channels (as Keras requires); use one of " + divisors + " (or -1: one per channel)");
    }
    return inputs[0];
  }

 protected:
  size_t rows(Shape s) const override { return size_t(s.n) * size_t(groups_); }
  void compute_stats(const Device& d, const Tensor& x, NormArgs a) override {
    const Shape s = x.shape();
    on_device(sums_, d).resize(size_t(2) * size_t(s.n) * size_t(s.c));
    a.groups = groups_, a.sums = sums_.data();
    group_norm_stats(d, x.data(), s, o_.epsilon, a);
  }
  void apply(const Device& d, const Tensor& x, NormArgs a, float* y) override {
    a.groups = groups_;
    group_norm_apply(d, x.data(), x.shape(), a, y);
  }
  void compute_grads(const Device& d, const Tensor& x, const Tensor& dy, NormArgs a, float* dx) override {
    const Shape s = x.shape();
    on_device(sums_, d).resize(size_t(2) * size_t(s.n) * size_t(s.c));
    on_device(coef_, d).resize(size_t(2) * rows(s));
    a.groups = groups_, a.sums = sums_.data(), a.coef = coef_.data();
    group_norm_backward(d, x.data(), dy.data(), s, a, dx);
  }

 private:
  int configured_groups_;
  int groups_ = 0;         ///< From infer().
  Buffer<float> coef_;     ///< Backward's per (sample, group) means [N, groups, 2].
  Buffer<double> sums_;    ///< Per (sample, channel) sums [N, C, 2].
};

}  // namespace

std::unique_ptr<Layer> make_group_normalization(ParamReader& p, const std::string& name) {
  NormOptions o = read_norm_options(p, "GroupNormalization", "");
  const int groups = p.get_int("groups", 32);
  if (groups < 1 && groups != -1)
    p.fail("groups", "must be at least 1 (a divisor of the channels), or -1 for one group per channel; got " +
                         std::to_string(groups));
  return std::make_unique<GroupNormalization>(name, std::move(o), groups);
}

}  // namespace trainer
