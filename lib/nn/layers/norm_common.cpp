#include "nn/layers/norm_common.h"

#include "core/error.h"
#include "nn/initializers.h"
#include "nn/layers/on_device.h"

namespace trainer {

NormOptions read_norm_options(ParamReader& p, const std::string& layer_type, const std::string& axis_fix) {
  const YAML::Node a = p.get_node("axis");  // Keras's int, or a one-element list of it
  const YAML::Node v = a && a.IsSequence() && a.size() == 1 ? a[0] : a;
  int axis = -1;
  try {
    if (v) axis = v.as<int>();
  } catch (const YAML::Exception&) {
    axis = 0;  // a list of several axes, or not a number
  }
  if (axis != -1 && axis != 3)
    p.fail("axis", "must be -1 (or 3): trainer's " + layer_type +
                       " normalises the channel axis of NHWC tensors only" + axis_fix);
  NormOptions o;
  o.epsilon = p.get_double("epsilon", 1e-3, 1e-12);
  o.center = p.get_bool("center", true);
  o.scale = p.get_bool("scale", true);
  o.beta_init = p.get_string("beta_initializer", std::string("zeros"), initializer_names());
  o.gamma_init = p.get_string("gamma_initializer", std::string("ones"), initializer_names());
  o.beta_regularizer = read_regularizer(p, "beta_regularizer");
  o.gamma_regularizer = read_regularizer(p, "gamma_regularizer");
  return o;
}

std::vector<ParamSpec> SampleNormLayer::param_specs() const {
  std::vector<ParamSpec> v;
  const int c = in_.c;
  auto spec = [&](const char* name, const std::string& init, const Regularizer& r) {
    v.push_back(ParamSpec{name, {c}, init, double(c), double(c), true, r});
  };
  if (o_.scale) spec("gamma", o_.gamma_init, o_.gamma_regularizer);
  if (o_.center) spec("beta", o_.beta_init, o_.beta_regularizer);
  return v;
}

void SampleNormLayer::bind(const std::vector<float*>& params, const std::vector<float*>& grads) {
  size_t i = 0;
  if (o_.scale) gamma_ = params[i], dgamma_ = grads[i], ++i;
  if (o_.center) beta_ = params[i], dbeta_ = grads[i];
}

void SampleNormLayer::forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) {
  const Device& d = ctx.device;
  y.resize(x[0]->shape());
  // An inference forward (validation, predict) leaves the training forward's statistics to backward.
  Stats& st = ctx.training ? train_ : inference_;
  const size_t n = rows(x[0]->shape());
  on_device(st.mean, d).resize(n);
  on_device(st.istd, d).resize(n);
  const NormArgs a = args(st);
  compute_stats(d, *x[0], a);
  apply(d, *x[0], a, y.data());
}

void SampleNormLayer::backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&,
                               const Tensor& dy, const std::vector<Tensor*>& dx) {
  if (train_.mean.size() != rows(x[0]->shape()))
    throw InternalError("layer '" + name() + "': backward without its training forward's statistics");
  if (dx[0]) dx[0]->resize(x[0]->shape());
  compute_grads(ctx.device, *x[0], dy, args(train_), dx[0] ? dx[0]->data() : nullptr);
}

NormArgs SampleNormLayer::args(Stats& st) const {
  NormArgs a;
  a.mean = st.mean.data(), a.istd = st.istd.data();
  a.gamma = gamma_, a.beta = beta_;
  a.dgamma = dgamma_, a.dbeta = dbeta_;
  return a;
}

}  // namespace trainer
