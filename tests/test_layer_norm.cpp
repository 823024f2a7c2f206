// LayerNormalization: forward against a direct computation in double of
// Keras's formula (each pixel's channels normalised by their own mean and
// biased variance), with and without gamma or beta; finite-difference
// gradients; the weight gradients' sums over many pixels, a backward after
// an inference forward, without dx, and on an empty shard; config errors; and
// N CPU towers reaching one tower's weights.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "config/config.h"
#include "core/error.h"
#include "layer_testing.h"
#include "tiny_model.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// keras.layers.LayerNormalization(axis=-1) of x in double: per pixel,
/// (x - mean) / sqrt(var + epsilon) over its C channels (biased var), times
/// gamma[c] plus beta[c] (empty: 1 and 0).
std::vector<double> reference(const Tensor& x, double epsilon, const std::vector<float>& gamma,
                              const std::vector<float>& beta) {
  const size_t C = size_t(x.shape().c), pixels = x.numel() / C;
  std::vector<double> y(x.numel());
  for (size_t p = 0; p < pixels; ++p) {
    const float* v = x.data() + p * C;
    double mean = 0, var = 0;
    for (size_t c = 0; c < C; ++c) mean += v[c];
    mean /= double(C);
    for (size_t c = 0; c < C; ++c) var += (v[c] - mean) * (v[c] - mean);
    const double istd = 1 / std::sqrt(var / double(C) + epsilon);
    for (size_t c = 0; c < C; ++c)
      y[p * C + c] = (v[c] - mean) * istd * (gamma.empty() ? 1.0 : gamma[c]) + (beta.empty() ? 0.0 : beta[c]);
  }
  return y;
}

}  // namespace

TEST_CASE("LayerNormalization normalises each pixel's channels as Keras, with Keras's weights",
          "[layers][layer_norm]") {
  struct Case {
    std::string yaml;
    double epsilon;
    bool scale, center;
  };
  const Case cases[] = {
      {"{type: LayerNormalization}", 1e-3, true, true},
      {"{type: LayerNormalization, epsilon: 0.01, axis: 3}", 1e-2, true, true},
      {"{type: LayerNormalization, scale: false}", 1e-3, false, true},
      {"{type: LayerNormalization, center: false, rms_scaling: false}", 1e-3, true, false},
  };
  const Shape xs{3, 4, 5, 6};
  for (const Case& c : cases) {
    INFO(c.yaml);
    auto l = layer_from_yaml(c.yaml);
    BoundWeights w = bind_random(*l, {xs}, 21);
    const auto [gamma, beta] = check_norm_weights(w, c.scale, c.center, 6);
    Tensor x = random_tensor(xs, 22, 2.f, 9.f);  // far from 0, as activations after a ReLU and a shift
    for (size_t i = 0; i < x.numel(); i += 5) x.data()[i] *= 0.1f;
    const std::vector<double> want_y = reference(x, c.epsilon, gamma, beta);
    check_forward_in_both_modes(*l, x, want_y, 2e-5);  // the same statistics in both modes
  }
  // keras.layers.LayerNormalization() on 16 channels: gamma and beta of 16 each.
  auto keras = layer_from_yaml("{type: LayerNormalization, beta_regularizer: l2}");
  keras->infer({Shape{1, 8, 8, 16}});
  REQUIRE(keras->param_specs().size() == 2);
  CHECK(keras->param_specs()[0].numel() == 16);
  CHECK(keras->param_specs()[1].regularizer.l2 == Approx(0.01));
  CHECK(keras->describe().kind == LayerKind::LayerNormalization);
}

TEST_CASE("LayerNormalization's gradients match finite differences", "[layers][layer_norm]") {
  for (const char* yaml : {"{type: LayerNormalization}", "{type: LayerNormalization, center: false}",
                           "{type: LayerNormalization, scale: false, epsilon: 0.1}"}) {
    INFO(yaml);
    auto l = layer_from_yaml(yaml);
    BoundWeights w = bind_random(*l, {Shape{2, 3, 4, 5}}, 23);
    const GradCheckResult r = gradcheck(*l, w, {random_tensor({2, 3, 4, 5}, 24, -2.f, 3.f)}, training_context(),
                                        1e-2f, 300);
    CHECK(r.max_rel_error_inputs < 2e-3);
    CHECK(r.max_rel_error_params < 2e-3);
  }
}

TEST_CASE("LayerNormalization's weight gradients sum over every pixel and its backward keeps its statistics",
          "[layers][layer_norm]") {
  // 300 pixels: more than one of the CPU's 256-row blocks of the weight gradients.
  const Shape s{3, 10, 10, 4};
  auto l = layer_from_yaml("{type: LayerNormalization}");
  BoundWeights w = bind_random(*l, {s}, 25);
  const Tensor x = random_tensor(s, 26), dy = random_tensor(s, 27);
  const Context train = training_context();
  Tensor y, dx;
  l->forward(train, {&x}, y);
  l->backward(train, {&x}, y, dy, {&dx});
  const std::vector<double> xhat = reference(x, 1e-3, {}, {});
  for (size_t c = 0; c < 4; ++c) {
    double db = 0, dg = 0;
    for (size_t p = 0; p < 300; ++p) db += dy.data()[p * 4 + c], dg += dy.data()[p * 4 + c] * xhat[p * 4 + c];
    CHECK(w.grads[1][c] == Approx(db).epsilon(1e-5));
    CHECK(w.grads[0][c] == Approx(dg).epsilon(1e-5));
  }
  check_norm_backward(*l, w, s);  // ends with an empty shard's training forward
  CHECK_THROWS_AS(l->backward(train, {&x}, y, dy, {&dx}), InternalError);
}

TEST_CASE("LayerNormalization config errors name the fix", "[layers][layer_norm]") {
  for (const char* axis : {"1", "[1, 2, 3]", "[3, 3]", "channels"}) {
    INFO(axis);
    CHECK_THAT(layer_error(std::string("{type: LayerNormalization, axis: ") + axis + "}", Shape{1, 4, 4, 8}),
               Catch::Contains("axis") && Catch::Contains("channel axis") &&
                   Catch::Contains("use GroupNormalization with groups: 1"));
  }
  for (const char* axis : {"-1", "3", "[-1]", "[3]"})  // Keras also takes a one-element list
    CHECK(layer_error(std::string("{type: LayerNormalization, axis: ") + axis + "}", Shape{1, 4, 4, 8}) == "accepted");
  CHECK_THAT(layer_error("{type: LayerNormalization, rms_scaling: true}", Shape{1, 4, 4, 8}),
             Catch::Contains("rms_scaling") && Catch::Contains("set it to false or remove the key"));
  CHECK_THAT(layer_error("{type: LayerNormalization, epsilon: 0}", Shape{1, 4, 4, 8}), Catch::Contains("epsilon"));
  CHECK_THAT(layer_error("{type: LayerNormalization, groups: 2}", Shape{1, 4, 4, 8}), Catch::Contains("groups"));
  CHECK(layer_error("{type: LayerNormalization}", Shape{1, 4, 4, 1}) == "accepted");
}

TEST_CASE("a LayerNormalization network on N CPU towers reaches one tower's weights", "[towers][layer_norm][multitower]") {
  std::string yaml = tiny_config(false);
  const std::string bn = "type: BatchNormalization, synchronized: false}";
  REQUIRE(yaml.find(bn) != std::string::npos);
  yaml.replace(yaml.find(bn), bn.size(), "type: LayerNormalization}");
  check_towers_reach_one_tower(parse_config(yaml, "tiny.yaml"));
}
