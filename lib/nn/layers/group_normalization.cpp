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
//
// YAML keys (Keras 3's names and defaults): groups: 32 (-1: one group per
// channel, as Keras 3 reads it), axis: -1 (or 3; nothing else), epsilon: 0.001, center: true, scale: true, beta_initializer:
// zeros, gamma_initializer: ones, beta_regularizer and gamma_regularizer:
// none. C must be a multiple of groups (a UserError naming the divisors).
//
// Weights (Keras order and names): gamma [C] (when scale), beta [C] (when
// center). Backward (the chain rule through the group's mean and variance,
// as for BatchNormalization), xhat = (x - mean) * istd, M = H * W * C / groups:
//   dbeta = sum dy, dgamma = sum dy * xhat (over the samples and pixels),
//   dx = istd * (gamma dy - mean(gamma dy) - xhat * mean(gamma dy * xhat)),
// the means over the element's (sample, group).
#include "backend/elementwise_ops.h"
#include "core/buffer.h"
#include "core/error.h"
#include "nn/initializers.h"
#include "nn/layers/on_device.h"
#include "nn/registry.h"

namespace trainer {

namespace {

struct GNOptions {
  int groups = 32;  ///< As configured: -1 means one group per channel.
  double epsilon = 1e-3;
  bool center = true, scale = true;
  std::string beta_init = "zeros", gamma_init = "ones";
  Regularizer beta_regularizer, gamma_regularizer;
};

class GroupNormalization : public Layer {
 public:
  GroupNormalization(std::string name, GNOptions o) : Layer(std::move(name)), o_(std::move(o)) {}
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

  /// One input [H, W, C], C a multiple of groups (groups -1 becomes C); same
  /// shape out. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("GroupNormalization takes exactly 1 input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
    c_ = in_.c;
    groups_ = o_.groups == -1 ? c_ : o_.groups;
    if (c_ % groups_ != 0) {
      std::string divisors;
      for (int g = 1; g <= c_; ++g)
        if (c_ % g == 0) divisors += (divisors.empty() ? "" : ", ") + std::to_string(g);
      throw UserError("groups " + std::to_string(groups_) + " must divide the input's " + std::to_string(c_) +
                      " channels (as Keras requires); use one of " + divisors + " (or -1: one per channel)");
    }
    return inputs[0];
  }

  std::vector<ParamSpec> param_specs() const override {
    std::vector<ParamSpec> v;
    auto spec = [&](const char* name, const std::string& init, const Regularizer& r) {
      v.push_back(ParamSpec{name, {c_}, init, double(c_), double(c_), true, r});
    };
    if (o_.scale) spec("gamma", o_.gamma_init, o_.gamma_regularizer);
    if (o_.center) spec("beta", o_.beta_init, o_.beta_regularizer);
    return v;
  }

  void bind(const std::vector<float*>& params, const std::vector<float*>& grads) override {
    size_t i = 0;
    if (o_.scale) gamma_ = params[i], dgamma_ = grads[i], ++i;
    if (o_.center) beta_ = params[i], dbeta_ = grads[i];
  }

  /// y [N, H, W, C] from x: each sample's group statistics (kept for backward), then gn_apply.
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Shape s = x[0]->shape();
    const Device& d = ctx.device;
    y.resize(s);
    const size_t rows = size_t(s.n) * size_t(groups_);
    // An inference forward (validation, predict) leaves the training forward's statistics to backward.
    Stats& st = ctx.training ? train_ : inference_;
    on_device(sums_, d).resize(size_t(2) * size_t(s.n) * size_t(c_));
    on_device(st.mean, d).resize(rows);
    on_device(st.istd, d).resize(rows);
    group_norm_stats(d, x[0]->data(), s, groups_, o_.epsilon, sums_.data(), st.mean.data(), st.istd.data());
    group_norm_apply(d, x[0]->data(), s, groups_, st.mean.data(), st.istd.data(), gamma_, beta_, y.data());
  }

  /// dgamma, dbeta (this tower's sums; the tower all-reduce adds them) and,
  /// when the model needs it, dx (see above).
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    const Shape s = x[0]->shape();
    const Device& d = ctx.device;
    if (train_.mean.size() != size_t(s.n) * size_t(groups_))
      throw InternalError("layer '" + name() + "': backward without its training forward's statistics");
    on_device(sums_, d).resize(size_t(2) * size_t(s.n) * size_t(c_));
    on_device(coef_, d).resize(size_t(2) * train_.mean.size());
    if (dx[0]) dx[0]->resize(s);
    group_norm_backward(d, x[0]->data(), dy.data(), s, groups_, train_.mean.data(), train_.istd.data(), gamma_,
                        sums_.data(), coef_.data(), dgamma_, dbeta_, dx[0] ? dx[0]->data() : nullptr);
  }

 private:
  GNOptions o_;
  Shape in_;  ///< The per-sample input shape from infer().
  int c_ = 0, groups_ = 0;  ///< Channels and groups, from infer().
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  /// Per (sample, group) mean and 1 / sqrt(var + epsilon) [N, groups], on the tower's device.
  struct Stats {
    Buffer<float> mean, istd;
  };
  Stats train_, inference_;  ///< Of the last training forward, and of the last inference one.
  Buffer<float> coef_;         ///< Backward's per (sample, group) means [N, groups, 2].
  Buffer<double> sums_;        ///< Per (sample, channel) sums [N, C, 2].
};

}  // namespace

std::unique_ptr<Layer> make_group_normalization(ParamReader& p, const std::string& name) {
  const int axis = p.get_int("axis", -1);
  if (axis != -1 && axis != 3)
    p.fail("axis", "must be -1 (or 3): trainer normalises groups of the channel axis of NHWC tensors only");
  GNOptions o;
  o.groups = p.get_int("groups", 32, -1, 65536);
  if (o.groups == 0) p.fail("groups", "must be at least 1, or -1 for one group per channel");
  o.epsilon = p.get_double("epsilon", 1e-3, 1e-12);
  o.center = p.get_bool("center", true);
  o.scale = p.get_bool("scale", true);
  o.beta_init = p.get_string("beta_initializer", std::string("zeros"), initializer_names());
  o.gamma_init = p.get_string("gamma_initializer", std::string("ones"), initializer_names());
  o.beta_regularizer = read_regularizer(p, "beta_regularizer");
  o.gamma_regularizer = read_regularizer(p, "gamma_regularizer");
  return std::make_unique<GroupNormalization>(name, o);
}

}  // namespace trainer
