// The activations whose gradient needs their input (gelu, silu/swish,
// hard_silu/hard_swish, mish): Keras's values, finite-difference gradients over
// their whole shape, and the convolution-like layers that keep their
// pre-activation for them (nn/layers/kept_activation.h): the same bits as the
// layer without the activation followed by an Activation layer, and N CPU
// towers reaching one tower's weights.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "backend/ops.h"
#include "config/config.h"
#include "core/error.h"
#include "layer_testing.h"
#include "nn/activation.h"
#include "tiny_model.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// y = layer(x) (training mode) and dx, then every parameter gradient, for dy.
struct Pass {
  std::vector<float> y, dx;
  std::vector<std::vector<float>> grads;
};

Pass forward_backward(Layer& l, BoundWeights& w, const Tensor& x, const Tensor& dy) {
  const Context ctx = training_context();
  Tensor y, dx;
  l.forward(ctx, {&x}, y);
  l.backward(ctx, {&x}, y, dy, {&dx});
  return Pass{std::vector<float>(y.data(), y.data() + y.numel()), std::vector<float>(dx.data(), dx.data() + dx.numel()),
              w.grads};
}

/// The Keras formula of each activation in double (keras.activations).
double keras_value(const std::string& name, double x) {
  if (name == "gelu") return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  if (name == "silu" || name == "swish") return x / (1 + std::exp(-x));
  if (name == "hard_silu" || name == "hard_swish") return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
  if (name == "mish") return x * std::tanh(std::log1p(std::exp(x)));
  FAIL("no formula for " << name);
  return 0;
}

}  // namespace

TEST_CASE("gelu, silu, hard_silu and mish give Keras's values, under their aliases too", "[layers][activation]") {
  const std::vector<float> xs = {-7.f, -3.5f, -2.f, -0.5f, 0.f, 0.25f, 1.5f, 3.5f, 9.f};
  for (const std::string name : {"gelu", "silu", "swish", "hard_silu", "hard_swish", "mish"}) {
    INFO(name);
    auto l = layer_from_yaml("{type: Activation, activation: " + name + "}");
    const BoundWeights weights = bind_random(*l, {Shape{0, 1, 1, int(xs.size())}}, 1);
    const Tensor x = make_tensor({1, 1, 1, int(xs.size())}, xs);
    Tensor y;
    l->forward(Context{}, {&x}, y);
    for (size_t i = 0; i < xs.size(); ++i) {
      INFO("x = " << xs[i]);
      CHECK(y.data()[i] == Approx(keras_value(name, xs[i])).epsilon(2e-6).margin(1e-7));
    }
  }
  CHECK(activation_from_name("swish").is(ActivationKind::Silu));
  CHECK(activation_from_name("hard_swish").is(ActivationKind::HardSilu));
  CHECK(activation_name(activation_from_name("swish")) == "silu");
  // gelu keeps its tail where 1 + erf(x / sqrt 2) would cancel to 0: relative precision at x = -10.
  auto gelu = layer_from_yaml("{type: Activation, activation: gelu}");
  const BoundWeights weights = bind_random(*gelu, {Shape{0, 1, 1, 1}}, 1);
  const Tensor far = make_tensor({1, 1, 1, 1}, {-10.f});
  Tensor y;
  gelu->forward(Context{}, {&far}, y);
  CHECK(y.data()[0] == Approx(-5.0 * std::erfc(10 / std::sqrt(2.0))).epsilon(1e-4));
  CHECK(y.data()[0] < 0.f);
}

TEST_CASE("the gradients of gelu, silu, hard_silu and mish match finite differences over [-5, 5], and their "
          "limits beyond",
          "[layers][activation]") {
  for (const std::string name : {"gelu", "silu", "hard_silu", "mish"}) {
    INFO(name);
    auto l = layer_from_yaml("{type: Activation, activation: " + name + "}");
    auto w = bind_random(*l, {Shape{0, 4, 4, 3}}, 1);
    Tensor x = random_tensor({2, 4, 4, 3}, 21, -5.f, 5.f);
    for (size_t i = 0; i < x.numel(); ++i)  // hard_silu's corners at -3 and 3
      if (std::abs(std::abs(x.data()[i]) - 3.f) < 0.05f) x.data()[i] = 1.f;
    CHECK(gradcheck(*l, w, {x}, training_context(), 1e-2f).max_rel_error_inputs < 2e-3);
  }
  // Far out each is x (gradient 1) for x >> 0 and 0 (gradient 0) for x << 0; hard_silu's corners take the
  // flat sides' gradients (TensorFlow's relu6' = 0 there).
  const std::vector<float> far = {-100.f, -20.f, 20.f, 100.f, -3.f, 3.f};
  for (const std::string name : {"gelu", "silu", "hard_silu", "mish"}) {
    INFO(name);
    const Activation a = activation_from_name(name);
    std::vector<float> dx(far.size());
    for (size_t i = 0; i < far.size(); ++i) dx[i] = activation_dx(a, far[i], 1.f);
    CHECK(dx[0] == Approx(0.0).margin(1e-6));
    CHECK(dx[1] == Approx(0.0).margin(1e-6));
    CHECK(dx[2] == Approx(1.0).epsilon(1e-6));
    CHECK(dx[3] == Approx(1.0).epsilon(1e-6));
    CHECK(activation_value(a, 100.f) == Approx(100.0).epsilon(1e-6));
    CHECK(activation_value(a, -100.f) == Approx(0.0).margin(1e-6));
    if (name == "hard_silu") CHECK((dx[4] == 0.f && dx[5] == 1.f));
  }
}

TEST_CASE("activations that need their input are refused where only the output is kept", "[layers][activation]") {
  // The convolutions' fused backward sees only y: it refuses them (the layers apply them instead).
  const Activation gelu = activation_from_name("gelu");
  Conv2DOp conv(Conv2DParams{});
  float kernel[4] = {}, y[8] = {}, dy[8] = {}, x[8] = {}, dk[4] = {};
  ConvBackwardArgs a;
  a.act = gelu;
  a.y = {y, DType::F32, Shape{1, 2, 2, 2}};
  a.dy = dy;
  a.x = {x, DType::F32, Shape{1, 2, 2, 2}};
  a.kernel = kernel;
  a.dkernel = dk;
  CHECK_THROWS_AS(conv.backward(Device{}, a), InternalError);
  // A layer's backward without the training forward that kept the pre-activation names the layer.
  auto l = layer_from_yaml("{type: Conv2D, filters: 2, kernel_size: 1, activation: gelu}", "g1");
  const BoundWeights weights = bind_random(*l, {Shape{0, 2, 2, 2}}, 1);
  const Tensor xt = random_tensor({1, 2, 2, 2}, 2), dyt = random_tensor({1, 2, 2, 2}, 3);
  Tensor yt, dxt;
  l->forward(Context{}, {&xt}, yt);  // inference only
  CHECK_THROWS_WITH(l->backward(training_context(), {&xt}, yt, dyt, {&dxt}),
                    Catch::Contains("layer 'g1'") && Catch::Contains("gelu"));
}

TEST_CASE("a convolution-like layer with an activation that needs its input equals the linear layer and an "
          "Activation layer, and its gradients match finite differences",
          "[layers][activation]") {
  struct Case {
    std::string layer, activation;
    Shape xs;
  };
  const Case cases[] = {
      {"{type: Conv2D, filters: 3, kernel_size: 3, padding: same", "gelu", Shape{2, 5, 4, 2}},
      {"{type: Conv2DTranspose, filters: 2, kernel_size: 3, strides: 2, padding: same", "silu", Shape{2, 3, 4, 3}},
      {"{type: Dense, units: 4", "mish", Shape{2, 3, 3, 5}},
      {"{type: DepthwiseConv2D, kernel_size: 3, depth_multiplier: 2, padding: same", "hard_swish", Shape{1, 4, 5, 3}},
      {"{type: SeparableConv2D, filters: 3, kernel_size: 3, padding: same", "swish", Shape{2, 4, 4, 2}},
  };
  for (const Case& c : cases) {
    INFO(c.layer << ", activation " << c.activation);
    auto fused = layer_from_yaml(c.layer + ", activation: " + c.activation + "}");
    auto linear = layer_from_yaml(c.layer + "}");
    auto act = layer_from_yaml("{type: Activation, activation: " + c.activation + "}");
    BoundWeights wf = bind_random(*fused, {c.xs}, 7), wl = bind_random(*linear, {c.xs}, 7);
    const Shape ys = fused->infer({c.xs}).with_batch(c.xs.n);
    const BoundWeights weights = bind_random(*act, {ys}, 1);
    // Larger weights and inputs than [-1, 1) so that hard_silu's pre-activations pass its corners at -3 and 3.
    Tensor x = random_tensor(c.xs, 3, -3.f, 3.f);
    const Tensor dy = random_tensor(ys, 4);
    const Pass got = forward_backward(*fused, wf, x, dy);

    const Context ctx = training_context();
    Tensor z, y, dz, dx;
    linear->forward(ctx, {&x}, z);
    act->forward(ctx, {&z}, y);
    act->backward(ctx, {&z}, y, dy, {&dz});
    linear->backward(ctx, {&x}, z, dz, {&dx});
    CHECK(got.y == std::vector<float>(y.data(), y.data() + y.numel()));
    CHECK(got.dx == std::vector<float>(dx.data(), dx.data() + dx.numel()));
    CHECK(got.grads == wl.grads);
    // An inference forward in between applies the activation too, and keeps nothing: backward still takes
    // the training forward's.
    Tensor other = random_tensor(c.xs.with_batch(1), 5, -3.f, 3.f), unused, dx_again, z_other, y_other;
    fused->forward(Context{}, {&other}, unused);
    linear->forward(Context{}, {&other}, z_other);
    act->forward(Context{}, {&z_other}, y_other);
    CHECK(std::vector<float>(unused.data(), unused.data() + unused.numel()) ==
          std::vector<float>(y_other.data(), y_other.data() + y_other.numel()));
    fused->backward(ctx, {&x}, make_tensor(ys, got.y), dy, {&dx_again});
    CHECK(std::vector<float>(dx_again.data(), dx_again.data() + dx_again.numel()) == got.dx);
    CHECK(wf.grads == got.grads);

    const GradCheckResult r = gradcheck(*fused, wf, {random_tensor(c.xs, 6)}, ctx, 1e-2f, 300);
    CHECK(r.max_rel_error_inputs < 1e-2);
    CHECK(r.max_rel_error_params < 1e-2);
  }
}

TEST_CASE("a network of gelu, swish and mish layers on N CPU towers reaches one tower's weights",
          "[towers][activation][multitower]") {
  std::string yaml = tiny_config(true);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"name: c1, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: relu",
            "name: c1, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: gelu"},
           {"name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu",
            "name: c2, type: SeparableConv2D, filters: 8, kernel_size: 3, padding: same, activation: swish"},
           {"name: u1, type: Conv2DTranspose, filters: 4, kernel_size: 2, strides: 2, padding: same",
            "name: u1, type: Conv2DTranspose, filters: 4, kernel_size: 2, strides: 2, padding: same, activation: mish"},
       }) {
    REQUIRE(yaml.find(from) != std::string::npos);
    yaml.replace(yaml.find(from), from.size(), to);
  }
  const Config config = parse_config(yaml, "tiny.yaml");
  check_towers_reach_one_tower(config);
}
