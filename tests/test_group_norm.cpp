// GroupNormalization: forward against a direct computation in double of
// Keras's formula (each sample's group statistics) for several group counts
// and without gamma or beta, Keras's weights, finite-difference gradients,
// a constant group and one-value groups, config errors, a backward after an
// inference forward and an empty shard, and N CPU towers reaching one tower's
// weights.
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

/// Keras's GroupNormalization of x in double: per sample and group of C /
/// groups consecutive channels, (x - mean) / sqrt(var + epsilon) (biased
/// var), times gamma[c] plus beta[c] (empty: 1 and 0).
std::vector<double> reference(const Tensor& x, int groups, double epsilon, const std::vector<float>& gamma,
                              const std::vector<float>& beta) {
  const Shape s = x.shape();
  const int per = s.c / groups;
  const size_t hw = size_t(s.h) * s.w;
  std::vector<double> y(x.numel());
  for (int n = 0; n < s.n; ++n)
    for (int g = 0; g < groups; ++g) {
      double sum = 0, sq = 0;
      const double m = double(hw) * per;
      auto at = [&](size_t p, int c) { return (size_t(n) * hw + p) * size_t(s.c) + size_t(c); };
      for (size_t p = 0; p < hw; ++p)
        for (int c = g * per; c < (g + 1) * per; ++c) sum += x.data()[at(p, c)];
      const double mean = sum / m;
      for (size_t p = 0; p < hw; ++p)
        for (int c = g * per; c < (g + 1) * per; ++c) sq += std::pow(x.data()[at(p, c)] - mean, 2);
      const double istd = 1 / std::sqrt(sq / m + epsilon);
      for (size_t p = 0; p < hw; ++p)
        for (int c = g * per; c < (g + 1) * per; ++c)
          y[at(p, c)] = (x.data()[at(p, c)] - mean) * istd * (gamma.empty() ? 1.0 : gamma[size_t(c)]) +
                        (beta.empty() ? 0.0 : beta[size_t(c)]);
    }
  return y;
}

}  // namespace

TEST_CASE("GroupNormalization normalises each sample's groups as Keras, with Keras's weights", "[layers][group_norm]") {
  struct Case {
    std::string yaml;
    int groups;
    double epsilon;
    bool scale, center;
  };
  const Case cases[] = {
      {"{type: GroupNormalization, groups: 3}", 3, 1e-3, true, true},
      {"{type: GroupNormalization, groups: 1, epsilon: 0.01}", 1, 1e-2, true, true},  // LayerNorm over H, W, C
      {"{type: GroupNormalization, groups: 6, scale: false}", 6, 1e-3, false, true},   // InstanceNorm
      {"{type: GroupNormalization, groups: 2, center: false, axis: 3}", 2, 1e-3, true, false},
      {"{type: GroupNormalization, groups: -1}", 6, 1e-3, true, true},  // Keras 3: one group per channel
  };
  const Shape xs{3, 4, 5, 6};
  for (const Case& c : cases) {
    INFO(c.yaml);
    auto l = layer_from_yaml(c.yaml);
    BoundWeights w = bind_random(*l, {xs}, 11);
    const auto [gamma, beta] = check_norm_weights(w, c.scale, c.center, 6);
    // Values far from 0 with a spread per sample, as activations after a ReLU and a shift.
    Tensor x = random_tensor(xs, 12, 2.f, 9.f);
    for (size_t i = 0; i < x.numel(); i += 7) x.data()[i] *= 0.1f;
    const std::vector<double> want_y = reference(x, c.groups, c.epsilon, gamma, beta);
    check_forward_in_both_modes(*l, x, want_y, 2e-5);  // the same statistics in both modes
  }
  // keras.layers.GroupNormalization(groups=4) on 16 channels: 32 parameters, none without center and scale.
  auto keras = layer_from_yaml("{type: GroupNormalization, groups: 4}");
  keras->infer({Shape{1, 8, 8, 16}});
  CHECK(keras->param_specs().size() == 2);
  auto bare = layer_from_yaml("{type: GroupNormalization, groups: 4, center: false, scale: false}");
  bare->infer({Shape{1, 8, 8, 16}});
  CHECK(bare->param_specs().empty());
  auto reg = layer_from_yaml("{type: GroupNormalization, groups: 4, gamma_regularizer: l2}");
  reg->infer({Shape{1, 8, 8, 16}});
  CHECK(reg->param_specs()[0].regularizer.l2 == Approx(0.01));
}

TEST_CASE("GroupNormalization's gradients match finite differences", "[layers][group_norm]") {
  for (const char* yaml : {"{type: GroupNormalization, groups: 2}", "{type: GroupNormalization, groups: 1}",
                           "{type: GroupNormalization, groups: 4, center: false}",
                           "{type: GroupNormalization, groups: 4, scale: false}"}) {
    INFO(yaml);
    auto l = layer_from_yaml(yaml);
    BoundWeights w = bind_random(*l, {Shape{2, 3, 4, 4}}, 5);
    const GradCheckResult r = gradcheck(*l, w, {random_tensor({2, 3, 4, 4}, 6, -2.f, 3.f)}, training_context(),
                                        1e-2f, 300);
    CHECK(r.max_rel_error_inputs < 2e-3);
    CHECK(r.max_rel_error_params < 2e-3);
  }
}

TEST_CASE("GroupNormalization's backward keeps its training statistics, and an empty shard learns nothing",
          "[layers][group_norm]") {
  auto l = layer_from_yaml("{type: GroupNormalization, groups: 2}");
  BoundWeights w = bind_random(*l, {Shape{2, 3, 3, 4}}, 7);
  check_norm_backward(*l, w, Shape{2, 3, 3, 4});
}

TEST_CASE("GroupNormalization: a constant group and a one-value group give beta and finite gradients",
          "[layers][group_norm]") {
  // Sample 0's first group is constant (variance 0, istd = 1 / sqrt(epsilon)):
  // its outputs are exactly beta, and the gradients stay finite and match
  // finite differences (epsilon 0.01: with 1e-3 the step's second-order
  // change of the variance, h^2 / M against epsilon, bends the differences).
  auto l = layer_from_yaml("{type: GroupNormalization, groups: 2, epsilon: 0.01}");
  BoundWeights w = bind_random(*l, {Shape{2, 3, 3, 4}}, 13);
  Tensor x = random_tensor({2, 3, 3, 4}, 14, -2.f, 3.f);
  for (size_t p = 0; p < 9; ++p) x.data()[p * 4] = x.data()[p * 4 + 1] = 2.5f;
  const Context train = training_context();
  Tensor y;
  l->forward(train, {&x}, y);
  const std::vector<float>& beta = w.params[1];
  for (size_t p = 0; p < 9; ++p)
    for (int c = 0; c < 2; ++c) REQUIRE(y.data()[p * 4 + size_t(c)] == beta[size_t(c)]);
  const GradCheckResult r = gradcheck(*l, w, {x}, train, 1e-2f, 300);
  CHECK(r.max_rel_error_inputs < 2e-3);
  CHECK(r.max_rel_error_params < 2e-3);

  // A 1x1 input with one channel per group: each group holds one value, so
  // y = beta and dx = 0 (the value is its own mean).
  auto one = layer_from_yaml("{type: GroupNormalization, groups: -1}");
  BoundWeights w1 = bind_random(*one, {Shape{2, 1, 1, 3}}, 15);
  const Tensor x1 = random_tensor({2, 1, 1, 3}, 16), dy1 = random_tensor({2, 1, 1, 3}, 17);
  Tensor y1, dx1;
  one->forward(train, {&x1}, y1);
  one->backward(train, {&x1}, y1, dy1, {&dx1});
  for (size_t i = 0; i < y1.numel(); ++i) {
    REQUIRE(y1.data()[i] == w1.params[1][i % 3]);
    REQUIRE(dx1.data()[i] == 0.f);
  }
  for (size_t c = 0; c < 3; ++c) {  // dbeta = sum dy; dgamma = sum dy * xhat = 0
    CHECK(w1.grads[1][c] == Approx(dy1.data()[c] + dy1.data()[3 + c]));
    CHECK(w1.grads[0][c] == 0.f);
  }
}

TEST_CASE("GroupNormalization config errors name the fix", "[layers][group_norm]") {
  CHECK_THAT(layer_error("{type: GroupNormalization}", Shape{1, 4, 4, 16}),
             Catch::Contains("groups 32 must divide the input's 16 channels") &&
                 Catch::Contains("use one of 1, 2, 4, 8, 16"));
  CHECK_THAT(layer_error("{type: GroupNormalization, groups: 3}", Shape{1, 4, 4, 8}),
             Catch::Contains("use one of 1, 2, 4, 8"));
  CHECK(layer_error("{type: GroupNormalization, groups: 8}", Shape{1, 4, 4, 8}) == "accepted");
  CHECK_THAT(layer_error("{type: GroupNormalization, axis: 1}", Shape{1, 4, 4, 32}), Catch::Contains("axis"));
  CHECK_THAT(layer_error("{type: GroupNormalization, groups: 0}", Shape{1, 4, 4, 32}),
             Catch::Contains("groups") && Catch::Contains("-1 for one group per channel; got 0"));
  CHECK_THAT(layer_error("{type: GroupNormalization, groups: -2}", Shape{1, 4, 4, 32}),
             Catch::Contains("'groups' must be at least 1 (a divisor of the channels), or -1 for one group per "
                             "channel; got -2"));
  CHECK(layer_error("{type: GroupNormalization, groups: -1}", Shape{1, 4, 4, 5}) == "accepted");
  CHECK_THAT(layer_error("{type: GroupNormalization, epsilon: 0}", Shape{1, 4, 4, 32}), Catch::Contains("epsilon"));
}

TEST_CASE("a GroupNormalization network on N CPU towers reaches one tower's weights", "[towers][group_norm][multitower]") {
  std::string yaml = tiny_config(false);
  const std::string bn = "type: BatchNormalization, synchronized: false}";
  REQUIRE(yaml.find(bn) != std::string::npos);
  yaml.replace(yaml.find(bn), bn.size(), "type: GroupNormalization, groups: 2}");
  const Config config = parse_config(yaml, "tiny.yaml");
  check_towers_reach_one_tower(config);
}
