#include "layer_testing.h"

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "config/params.h"
#include "core/error.h"
#include "nn/registry.h"

namespace trainer::testing {

std::unique_ptr<Layer> layer_from_yaml(const std::string& yaml, const std::string& name) {
  YAML::Node node = YAML::Load(yaml);
  ParamReader p(node, "<test>", "layer '" + name + "'");
  std::string type = p.get_string("type", std::nullopt);
  p.skip("name");
  p.skip("inputs");
  LayerFactory make = find_layer_factory(type);
  if (!make) throw UserError("unknown layer type " + type);
  auto layer = make(p, name);
  p.finish();
  return layer;
}

BoundWeights bind_random(Layer& layer, const std::vector<Shape>& inputs, unsigned seed) {
  layer.infer(inputs);
  BoundWeights w;
  w.specs = layer.param_specs();
  std::mt19937 rng(seed);
  std::vector<float*> p, g;
  for (const auto& s : w.specs) {
    bool var = s.name == "moving_variance";
    std::uniform_real_distribution<float> u(var ? 0.5f : -1.f, var ? 1.5f : 1.f);
    w.params.emplace_back(s.numel());
    for (auto& v : w.params.back()) v = u(rng);
    w.grads.emplace_back(s.trainable ? s.numel() : 0);
  }
  for (size_t i = 0; i < w.specs.size(); ++i) {
    p.push_back(w.params[i].data());
    g.push_back(w.specs[i].trainable ? w.grads[i].data() : nullptr);
  }
  layer.bind(p, g);
  return w;
}

Context training_context() {
  Context ctx;
  ctx.training = true;
  return ctx;
}

std::string layer_error(const std::string& yaml, Shape in) {
  try {
    layer_from_yaml(yaml)->infer({in});
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

std::pair<std::vector<float>, std::vector<float>> check_norm_weights(const BoundWeights& w, bool scale, bool center,
                                                                     int C) {
  std::vector<std::string> names;
  for (const ParamSpec& p : w.specs) {
    names.push_back(p.name);
    CHECK(p.shape == std::vector<int>{C});
    CHECK(p.trainable);
  }
  std::vector<std::string> want;
  if (scale) want.push_back("gamma");
  if (center) want.push_back("beta");
  CHECK(names == want);  // Keras's order
  return {scale ? w.params[0] : std::vector<float>{}, center ? w.params.back() : std::vector<float>{}};
}

void check_forward_in_both_modes(Layer& layer, const Tensor& x, const std::vector<double>& want, double tol) {
  for (const bool training : {true, false}) {
    INFO((training ? "training" : "inference") << " forward");
    Context ctx;
    ctx.training = training;
    Tensor y;
    layer.forward(ctx, {&x}, y);
    REQUIRE(y.shape() == x.shape());
    REQUIRE(want.size() == y.numel());
    double worst = 0;
    for (size_t i = 0; i < y.numel(); ++i) worst = std::max(worst, std::abs(y.data()[i] - want[i]));
    CHECK(worst < tol);
  }
}

void check_norm_backward(Layer& layer, BoundWeights& w, Shape s) {
  const Tensor x = random_tensor(s, 8), dy = random_tensor(s, 9);
  const Context train = training_context();
  Tensor y, dx;
  layer.forward(train, {&x}, y);
  layer.backward(train, {&x}, y, dy, {&dx});
  const std::vector<float> want_dx(dx.data(), dx.data() + dx.numel());
  const auto want_grads = w.grads;
  const Tensor other = random_tensor(s.with_batch(s.n + 1), 10);  // a validation-like forward in between
  Tensor unused;
  layer.forward(Context{}, {&other}, unused);
  layer.backward(train, {&x}, y, dy, {&dx});
  CHECK(std::vector<float>(dx.data(), dx.data() + dx.numel()) == want_dx);
  CHECK(w.grads == want_grads);
  for (auto& g : w.grads) std::fill(g.begin(), g.end(), std::nanf(""));
  layer.backward(train, {&x}, y, dy, {nullptr});  // no dx wanted: the weight gradients still come
  CHECK(w.grads == want_grads);

  const Tensor none(s.with_batch(0));  // a tower with no sample this step
  layer.forward(train, {&none}, y);
  CHECK(y.numel() == 0);
  layer.backward(train, {&none}, y, none, {&dx});
  for (const auto& g : w.grads) CHECK(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.f; }));
}

Tensor make_tensor(Shape s, const std::vector<float>& v) {
  if (v.size() != s.numel())
    throw InternalError("make_tensor: " + std::to_string(v.size()) + " values for " + s.nhwc());
  Tensor t(s);
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

std::vector<float> tensor_values(const Tensor& t) { return std::vector<float>(t.data(), t.data() + t.numel()); }

Tensor random_tensor(Shape s, unsigned seed, float lo, float hi) {
  Tensor t(s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (size_t i = 0; i < t.numel(); ++i) t.data()[i] = u(rng);
  return t;
}

static double objective(Layer& layer, const Context& ctx, const std::vector<Tensor>& inputs,
                        const Tensor& r) {
  std::vector<const Tensor*> x;
  for (const auto& t : inputs) x.push_back(&t);
  Tensor y;
  layer.forward(ctx, x, y);
  double s = 0;
  for (size_t i = 0; i < y.numel(); ++i) s += double(y.data()[i]) * r.data()[i];
  return s;
}

static double rel(double a, double n) { return std::abs(a - n) / std::max({1.0, std::abs(a), std::abs(n)}); }

GradCheckResult gradcheck(Layer& layer, BoundWeights& w, std::vector<Tensor> inputs,
                          const Context& ctx, float h, int max_checks) {
  std::vector<const Tensor*> x;
  for (const auto& t : inputs) x.push_back(&t);
  Tensor y;
  layer.forward(ctx, x, y);
  Tensor r = random_tensor(y.shape(), 1234);
  std::vector<Tensor> dx(inputs.size());
  std::vector<Tensor*> dxp;
  for (auto& t : dx) dxp.push_back(&t);
  // Backward gets what a model's step leaves it: the tensors it says it does
  // not read (Layer::backward_reads) keep their shapes only, so reading them
  // throws, and their memory holds NaN (as another tensor's values), so a
  // read through a pointer kept from forward spoils the gradients.
  const BackwardReads reads = layer.backward_reads();
  std::vector<std::vector<float>> kept_values;
  std::vector<Buffer<float>> poisoned;
  const auto poison = [&](Tensor& t) {
    kept_values.push_back(tensor_values(t));
    poisoned.push_back(t.release_storage());
    std::fill(poisoned.back().data(), poisoned.back().data() + poisoned.back().size(), std::nanf(""));
  };
  for (size_t k = 0; k < inputs.size() && !reads.inputs; ++k) poison(inputs[k]);
  if (!reads.output) poison(y);
  layer.backward(ctx, x, y, r, dxp);
  // The inputs get their storage (at the same addresses) and values back for the differences below.
  for (size_t k = 0; k < inputs.size() && !reads.inputs; ++k) {
    const Shape s = inputs[k].shape();
    inputs[k].adopt_storage(std::move(poisoned[k]));
    inputs[k].resize(s);
    std::copy(kept_values[k].begin(), kept_values[k].end(), inputs[k].data());
  }

  GradCheckResult res;
  auto check = [&](float* v, size_t n, const float* analytic, double& worst) {
    size_t stride = std::max<size_t>(1, n / size_t(max_checks));
    for (size_t i = 0; i < n; i += stride) {
      float keep = v[i];
      v[i] = keep + h;
      double lp = objective(layer, ctx, inputs, r);
      v[i] = keep - h;
      double lm = objective(layer, ctx, inputs, r);
      v[i] = keep;
      worst = std::max(worst, rel(analytic[i], (lp - lm) / (2.0 * h)));
    }
  };
  for (size_t k = 0; k < inputs.size(); ++k)
    check(inputs[k].data(), inputs[k].numel(), dx[k].data(), res.max_rel_error_inputs);
  for (size_t k = 0; k < w.specs.size(); ++k)
    if (w.specs[k].trainable)
      check(w.params[k].data(), w.params[k].size(), w.grads[k].data(), res.max_rel_error_params);
  return res;
}

double loss_gradient_gap(LossKind kind, const CrossEntropyForm& form, Tensor logits, const Tensor& targets,
                         const OverlapForm& overlap) {
  Tensor g;
  loss_sum(kind, logits, targets, &g, std::nullopt, form, overlap);
  const float h = 1e-2f;
  double worst = 0;
  for (size_t i = 0; i < logits.numel(); ++i) {
    const float keep = logits.data()[i];
    logits.data()[i] = keep + h;
    const double up = loss_sum(kind, logits, targets, nullptr, std::nullopt, form, overlap);
    logits.data()[i] = keep - h;
    const double down = loss_sum(kind, logits, targets, nullptr, std::nullopt, form, overlap);
    logits.data()[i] = keep;
    const double numeric = (up - down) / (2.0 * h);
    worst = std::max(worst, std::fabs(numeric - g.data()[i]) / std::max(1e-2, std::fabs(numeric)));
  }
  return worst;
}

}  // namespace trainer::testing
