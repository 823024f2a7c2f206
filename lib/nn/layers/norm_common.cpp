#include "nn/layers/norm_common.h"

#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/initializers.h"
#include "nn/layers/on_device.h"

namespace trainer {

NormOptions read_norm_options(ParamReader& p, const std::string& layer_type) {
  const int axis = p.get_int("axis", -1);
  if (axis != -1 && axis != 3)
    p.fail("axis", "must be -1 (or 3): trainer's " + layer_type + " normalises the channel axis of NHWC tensors only");
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
  const Shape s = stats_shape(x[0]->shape());
  const Device& d = ctx.device;
  y.resize(x[0]->shape());
  const size_t rows = size_t(s.n) * size_t(groups());
  // An inference forward (validation, predict) leaves the training forward's statistics to backward.
  Stats& st = ctx.training ? train_ : inference_;
  on_device(sums_, d).resize(size_t(2) * size_t(s.n) * size_t(s.c));
  on_device(st.mean, d).resize(rows);
  on_device(st.istd, d).resize(rows);
  group_norm_stats(d, x[0]->data(), s, groups(), o_.epsilon, sums_.data(), st.mean.data(), st.istd.data());
  group_norm_apply(d, x[0]->data(), s, groups(), st.mean.data(), st.istd.data(), gamma_, beta_, y.data());
}

void SampleNormLayer::backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&,
                               const Tensor& dy, const std::vector<Tensor*>& dx) {
  const Shape s = stats_shape(x[0]->shape());
  const Device& d = ctx.device;
  if (train_.mean.size() != size_t(s.n) * size_t(groups()))
    throw InternalError("layer '" + name() + "': backward without its training forward's statistics");
  on_device(sums_, d).resize(size_t(2) * size_t(s.n) * size_t(s.c));
  on_device(coef_, d).resize(size_t(2) * train_.mean.size());
  if (dx[0]) dx[0]->resize(x[0]->shape());
  group_norm_backward(d, x[0]->data(), dy.data(), s, groups(), train_.mean.data(), train_.istd.data(), gamma_,
                      sums_.data(), coef_.data(), dgamma_, dbeta_, dx[0] ? dx[0]->data() : nullptr);
}

}  // namespace trainer
