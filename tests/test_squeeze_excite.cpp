// Tests of the layers of squeeze-and-excitation blocks (Hu et al. 2018) and
// CBAM-style channel attention: GlobalAveragePooling2D, GlobalMaxPooling2D,
// Dense, Reshape and Multiply's [1, 1, C] broadcast. Hand-computed values,
// finite-difference gradients, Keras's shapes and errors, and an SE network
// on 1, 2 and 3 CPU towers reaching the same weights.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "config/config.h"
#include "core/error.h"
#include "layer_testing.h"
#include "tiny_model.h"
#include "train/trainer.h"

using namespace trainer;
using namespace trainer::testing;

namespace {


Tensor run_forward(Layer& l, const std::vector<const Tensor*>& x) {
  Tensor y;
  l.forward(Context{}, x, y);
  return y;
}

/// dx of a one-input layer for the last forward's x and y, and dy.
Tensor run_backward(Layer& l, const Tensor& x, const Tensor& y, const Tensor& dy) {
  Tensor dx;
  l.backward(Context{}, {&x}, y, dy, {&dx});
  return dx;
}

/// A random tensor whose values are all distinct, at least 0.05 apart (so a
/// finite difference of 1e-2 never changes which value is largest).
Tensor spread_tensor(Shape s, unsigned seed) {
  Tensor t = random_tensor(s, seed);
  std::vector<size_t> order(t.numel());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.data()[a] < t.data()[b]; });
  for (size_t r = 0; r < order.size(); ++r) t.data()[order[r]] = -1.f + 0.05f * float(r);
  return t;
}

}  // namespace

TEST_CASE("GlobalAveragePooling2D and GlobalMaxPooling2D: per-channel mean and max, Keras's keys", "[layers]") {
  auto avg = layer_from_yaml("{type: GlobalAveragePooling2D}");
  auto max = layer_from_yaml("{type: GlobalMaxPooling2D, keepdims: true}");
  for (auto* l : {avg.get(), max.get()}) CHECK(l->infer({Shape{0, 3, 4, 2}}) == Shape{0, 1, 1, 2});
  // Two samples of 2x2 pixels, 2 channels: channel 0 holds 1, 2, 3, 6 and -1, -2, -3, -4.
  const Tensor x = make_tensor({2, 2, 2, 2}, {1, 10, 2, 20, 3, 30, 6, 40, -1, 0, -2, 0, -3, 0, -4, 0});
  for (auto* l : {avg.get(), max.get()}) l->infer({Shape{0, 2, 2, 2}});
  const Tensor ya = run_forward(*avg, {&x}), ym = run_forward(*max, {&x});
  CHECK(ya.shape() == Shape{2, 1, 1, 2});
  CHECK(tensor_values(ya) == std::vector<float>{3, 25, -2.5f, 0});
  CHECK(tensor_values(ym) == std::vector<float>{6, 40, -1, 0});

  // Mean: every pixel gets dy / 4. Max: the largest pixel, the four tied zeros a quarter each.
  const Tensor dy = make_tensor({2, 1, 1, 2}, {4, 8, 12, -16});
  CHECK(tensor_values(run_backward(*avg, x, ya, dy)) ==
        std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2, 3, -4, 3, -4, 3, -4, 3, -4});
  CHECK(tensor_values(run_backward(*max, x, ym, dy)) ==
        std::vector<float>{0, 0, 0, 0, 0, 0, 4, 8, 12, -4, 0, -4, 0, -4, 0, -4});

  for (auto* l : {avg.get(), max.get()}) {
    INFO(l->type());
    auto w = bind_random(*l, {Shape{0, 3, 4, 5}}, 1);
    auto r = gradcheck(*l, w, {spread_tensor({2, 3, 4, 5}, 11)}, {});
    CHECK(r.max_rel_error_inputs < 1e-3);
  }
  // A NaN input gives a NaN maximum (tf.reduce_max), not a finite one.
  Tensor nan = make_tensor({1, 1, 2, 1}, {std::numeric_limits<float>::quiet_NaN(), 1});
  max->infer({Shape{0, 1, 2, 1}});
  CHECK(std::isnan(run_forward(*max, {&nan}).data()[0]));

  const LayerDescription d = avg->describe();  // exported as one window over the last inferred input, [3, 4, 5]
  CHECK(d.kind == LayerKind::AveragePooling2D);
  CHECK(d.kh == 3);
  CHECK(d.kw == 4);
  CHECK(d.stride_h == 3);
  CHECK(max->describe().kind == LayerKind::MaxPooling2D);
  CHECK_THROWS_WITH(layer_from_yaml("{type: GlobalAveragePooling2D, data_format: channels_first}"),
                    Catch::Contains("channels_last"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: GlobalMaxPooling2D, keepdims: 2}"), Catch::Contains("keepdims"));
  CHECK_THROWS_WITH(avg->infer({Shape{0, 2, 2, 2}, Shape{0, 2, 2, 2}}), Catch::Contains("takes one input"));
}

TEST_CASE("Dense: the last axis of every pixel, kernel [Cin, units] with Keras's fans", "[layers]") {
  auto l = layer_from_yaml("{type: Dense, units: 2, activation: relu, kernel_regularizer: l2}");
  CHECK(l->infer({Shape{0, 1, 2, 3}}) == Shape{0, 1, 2, 2});
  const auto specs = l->param_specs();
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].name == "kernel");
  CHECK(specs[0].shape == std::vector<int>{3, 2});
  CHECK(specs[0].initializer == "glorot_uniform");
  CHECK(specs[0].fan_in == 3);
  CHECK(specs[0].fan_out == 2);
  CHECK(specs[0].regularizer.l2 == Approx(0.01));
  CHECK(specs[1].shape == std::vector<int>{2});
  CHECK(specs[1].initializer == "zeros");

  // y[p] = relu(x[p] · kernel + bias) for each of the 2 pixels.
  std::vector<float> kernel = {1, -1, 2, 0, 0.5f, 3}, bias = {0.5f, -1}, dk(6), db(2);
  l->bind({kernel.data(), bias.data()}, {dk.data(), db.data()});
  const Tensor x = make_tensor({1, 1, 2, 3}, {1, 2, 4, -1, 0, 2});
  // pixel 0: [1 + 4 + 2, -1 + 0 + 12] + bias = [7.5, 10]; pixel 1: [-1 + 0 + 1, 1 + 0 + 6] + bias = [0.5, 6].
  CHECK(tensor_values(run_forward(*l, {&x})) == std::vector<float>{7.5f, 10, 0.5f, 6});

  auto g = layer_from_yaml("{type: Dense, units: 4, activation: tanh}");
  auto w = bind_random(*g, {Shape{0, 3, 2, 5}}, 2);
  auto r = gradcheck(*g, w, {random_tensor({2, 3, 2, 5}, 12)}, {});
  CHECK(r.max_rel_error_inputs < 1e-3);
  CHECK(r.max_rel_error_params < 1e-3);

  auto nobias = layer_from_yaml("{type: Dense, units: 3, use_bias: false}");
  nobias->infer({Shape{0, 1, 1, 8}});
  CHECK(nobias->param_specs().size() == 1);
  CHECK(nobias->describe().kind == LayerKind::Conv2D);  // exported as a 1x1 Conv
  CHECK_THROWS_WITH(layer_from_yaml("{type: Dense}"), Catch::Contains("units"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Dense, filters: 4}"), Catch::Contains("Dense takes 'units'"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Dense, units: 4, kernel_size: 1}"), Catch::Contains("unknown key"));
}

TEST_CASE("Reshape: target_shape with one -1, the same elements in order, and errors", "[layers]") {
  struct Case {
    const char* target;
    Shape out;
  };
  const Case cases[] = {{"[4, 3, 2]", {0, 4, 3, 2}},
                        {"[-1]", {0, 1, 1, 24}},
                        {"[1, 1, -1]", {0, 1, 1, 24}},
                        {"[6, -1, 2]", {0, 6, 2, 2}},
                        {"[null, 24]", {0, 1, 1, 24}}};  // Keras's batch dimension is not accepted below
  for (const Case& c : cases) {
    INFO(c.target);
    if (std::string(c.target).find("null") != std::string::npos) {
      CHECK_THROWS_WITH(layer_from_yaml(std::string("{type: Reshape, target_shape: ") + c.target + "}"),
                        Catch::Contains("leave out Keras's batch dimension"));
      continue;
    }
    auto l = layer_from_yaml(std::string("{type: Reshape, target_shape: ") + c.target + "}");
    CHECK(l->infer({Shape{0, 2, 3, 4}}) == c.out);
    const Tensor x = random_tensor({2, 2, 3, 4}, 5);
    const Tensor y = run_forward(*l, {&x});
    CHECK(y.shape() == c.out.with_batch(2));
    CHECK(tensor_values(y) == tensor_values(x));
    const Tensor dy = random_tensor(y.shape(), 6);
    const Tensor dx = run_backward(*l, x, y, dy);
    CHECK(dx.shape() == x.shape());
    CHECK(tensor_values(dx) == tensor_values(dy));
    CHECK(l->describe().kind == LayerKind::Reshape);
    CHECK(l->describe().output == c.out);
  }
  auto l = layer_from_yaml("{type: Reshape, target_shape: [5, 5, 1]}");
  CHECK_THROWS_WITH(l->infer({Shape{0, 2, 3, 4}}),
                    Catch::Contains("holds more values than the input's 24 values") && Catch::Contains("[2, 3, 4]"));
  auto few = layer_from_yaml("{type: Reshape, target_shape: [2, 2, 2]}");
  CHECK_THROWS_WITH(few->infer({Shape{0, 2, 3, 4}}),
                    Catch::Contains("holds 8 values, not the input's 24") && Catch::Contains("product is 24"));
  auto odd = layer_from_yaml("{type: Reshape, target_shape: [5, -1, 1]}");
  CHECK_THROWS_WITH(odd->infer({Shape{0, 2, 3, 4}}), Catch::Contains("the other sizes' product, 5, does not divide"));
  // Sizes whose product overflows 64 bits (to 2^64 + 96 here) are refused, not wrapped.
  auto huge = layer_from_yaml("{type: Reshape, target_shape: [1084076, 746008, 22809539]}");
  CHECK_THROWS_WITH(huge->infer({Shape{0, 4, 6, 4}}), Catch::Contains("holds more values"));
  auto wide = layer_from_yaml("{type: Reshape, target_shape: [1, 96, -1]}");
  CHECK(wide->infer({Shape{0, 4, 6, 4}}) == Shape{0, 1, 96, 1});
  auto tall = layer_from_yaml("{type: Reshape, target_shape: [-1, 1, 1]}");
  CHECK_THROWS_WITH(tall->infer({Shape{0, 2048, 2048, 1}}),
                    Catch::Contains("4194304 pixels high") && Catch::Contains("spread the values"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Reshape, target_shape: [4, 6]}"), Catch::Contains("2-entry target"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Reshape, target_shape: [null, 4, 6]}"),
                    Catch::Contains("leave out Keras's batch dimension: [4, 6]"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Reshape, target_shape: 24}"), Catch::Contains("must be a list of 3 sizes"));
  CHECK_THROWS_WITH(layer_from_yaml("type: Reshape\ntarget_shape: (1, 1, 24)"),
                    Catch::Contains("a Python tuple is a YAML list: [1, 1, 24]"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Reshape, target_shape: [0, 1, 24]}"), Catch::Contains("0 entry"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Reshape, target_shape: [-1, -1, 2]}"), Catch::Contains("more than one -1"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Reshape}"), Catch::Contains("'target_shape' is required"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Reshape, shape: [1, 1, 24]}"), Catch::Contains("not shape"));
}

TEST_CASE("Multiply broadcasts a [1, 1, C] input over height and width (squeeze-and-excitation)", "[layers]") {
  for (const bool scale_first : {false, true}) {
    INFO("scale first " << scale_first);
    auto m = layer_from_yaml("{type: Multiply}");
    const Shape wide{0, 2, 3, 4}, narrow{0, 1, 1, 4};
    const std::vector<Shape> shapes = scale_first ? std::vector<Shape>{narrow, wide} : std::vector<Shape>{wide, narrow};
    CHECK(m->infer(shapes) == wide);
    CHECK(m->describe().broadcast_input == (scale_first ? 0 : 1));
    CHECK(m->describe().output == wide);
    // Each pixel's channels times the sample's scales.
    const Tensor f = make_tensor({2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), s = make_tensor({2, 1, 1, 2}, {10, -1, 2, 0});
    m->infer(scale_first ? std::vector<Shape>{Shape{0, 1, 1, 2}, Shape{0, 1, 2, 2}}
                         : std::vector<Shape>{Shape{0, 1, 2, 2}, Shape{0, 1, 1, 2}});
    const Tensor y = scale_first ? run_forward(*m, {&s, &f}) : run_forward(*m, {&f, &s});
    CHECK(tensor_values(y) == std::vector<float>{10, -2, 30, -4, 10, 0, 14, 0});
    auto w = bind_random(*m, shapes, 1);
    const Tensor xw = random_tensor({2, 2, 3, 4}, 9), xn = random_tensor({2, 1, 1, 4}, 10);
    auto r = gradcheck(*m, w, scale_first ? std::vector<Tensor>{xn, xw} : std::vector<Tensor>{xw, xn}, {});
    CHECK(r.max_rel_error_inputs < 1e-3);
  }
  // A per-sample scalar [1, 1, 1] times [H, W, 1] or [H, W, C]: the scalar broadcast over everything.
  auto m = layer_from_yaml("{type: Multiply}");
  CHECK(m->infer({Shape{0, 2, 3, 1}, Shape{0, 1, 1, 1}}) == Shape{0, 2, 3, 1});
  CHECK(m->infer({Shape{0, 1, 1, 1}, Shape{0, 1, 2, 2}}) == Shape{0, 1, 2, 2});
  const Tensor f = make_tensor({2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), k = make_tensor({2, 1, 1, 1}, {10, -1});
  CHECK(tensor_values(run_forward(*m, {&k, &f})) == std::vector<float>{10, 20, 30, 40, -5, -6, -7, -8});
  auto w = bind_random(*m, {Shape{0, 2, 3, 4}, Shape{0, 1, 1, 1}}, 1);
  auto r = gradcheck(*m, w, {random_tensor({2, 2, 3, 4}, 13), random_tensor({2, 1, 1, 1}, 14)}, {});
  CHECK(r.max_rel_error_inputs < 1e-3);
  CHECK_THROWS_WITH(m->infer({Shape{0, 2, 3, 1}, Shape{0, 1, 1, 4}}), Catch::Contains("broadcasting both inputs"));
  CHECK_THROWS_WITH(m->infer({Shape{0, 2, 3, 4}, Shape{0, 1, 1, 2}}), Catch::Contains("the other's channels or 1"));
}

TEST_CASE("Add broadcasts [1, 1, C] and [1, 1, 1] inputs over the others' pixels, as Keras", "[layers]") {
  auto add = layer_from_yaml("{type: Add}");
  // A per-channel and a per-sample value first, the features last: the output has the features' shape.
  CHECK(add->infer({Shape{0, 1, 1, 2}, Shape{0, 1, 1, 1}, Shape{0, 1, 2, 2}}) == Shape{0, 1, 2, 2});
  const Tensor c = make_tensor({2, 1, 1, 2}, {10, 20, 30, 40}), k = make_tensor({2, 1, 1, 1}, {1, -1}),
               f = make_tensor({2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(tensor_values(run_forward(*add, {&c, &k, &f})) == std::vector<float>{12, 23, 14, 25, 34, 45, 36, 47});
  CHECK(add->describe().input_shapes.size() == 3);
  // Gradients: dy for the features, summed over the pixels (and channels) for the broadcast ones.
  const Tensor dy = make_tensor({2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor y = run_forward(*add, {&c, &k, &f}), dc, dk, df;
  add->backward(Context{}, {&c, &k, &f}, y, dy, {&dc, &dk, &df});
  CHECK(tensor_values(dc) == std::vector<float>{4, 6, 12, 14});
  CHECK(tensor_values(dk) == std::vector<float>{10, 26});
  CHECK(tensor_values(df) == tensor_values(dy));
  auto w = bind_random(*add, {Shape{0, 2, 3, 4}, Shape{0, 1, 1, 4}, Shape{0, 2, 3, 4}, Shape{0, 1, 1, 1}}, 1);
  auto r = gradcheck(*add, w,
                     {random_tensor({2, 2, 3, 4}, 15), random_tensor({2, 1, 1, 4}, 16), random_tensor({2, 2, 3, 4}, 17),
                      random_tensor({2, 1, 1, 1}, 18)},
                     {});
  CHECK(r.max_rel_error_inputs < 1e-3);
  CHECK_THROWS_WITH(add->infer({Shape{0, 2, 3, 4}, Shape{0, 1, 1, 2}}), Catch::Contains("[1, 1, C] / [1, 1, 1]"));
  CHECK_THROWS_WITH(add->infer({Shape{0, 2, 3, 4}, Shape{0, 2, 4, 4}}), Catch::Contains("padding"));
}


TEST_CASE("a squeeze-and-excitation network on N CPU towers reaches the weights of one tower", "[layers][towers][multitower]") {
  const Config config = parse_config(tiny_se_config(), "se.yaml");
  const Dataset data = tiny_data();
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}, {3, 9}};
  auto train = [&](int towers) {
    Trainer t(config, towers, 1);
    for (const auto& b : batches) REQUIRE(std::isfinite(t.train_step(data, b).loss()));
    for (int r = 1; r < towers; ++r) REQUIRE(t.params(r) == t.params(0));
    return t.params(0);
  };
  const std::vector<float> fresh = Trainer(config, 1, 1).params(0), one = train(1), two = train(2), three = train(3);
  auto max_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
    return worst;
  };
  REQUIRE(max_diff(fresh, one) > 1e-3);  // training moved the weights
  CHECK(max_diff(two, one) < 2e-5);
  CHECK(max_diff(three, one) < 2e-5);
}
