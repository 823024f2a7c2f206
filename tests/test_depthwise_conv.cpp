// DepthwiseConv2D and Conv2D's groups (grouped convolutions through oneDNN):
// forward against a direct loop over the grouped cross-correlation with
// TensorFlow's 'same' padding (strides, dilation, asymmetric padding,
// depth_multiplier), finite-difference gradients, Keras's weights, shapes and
// parameter counts, and the errors for keys that do not fit.
#include <catch2/catch.hpp>

#include <cmath>

#include "backend/ops.h"
#include "core/error.h"
#include "layer_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

Tensor forward(Layer& layer, const Tensor& x) {
  Context ctx;
  Tensor y;
  layer.forward(ctx, {&x}, y);
  return y;
}

/// The grouped cross-correlation a layer of `groups` groups computes (kernel
/// [kh, kw, Cin / groups, Cout] as Keras lays it out, output channel o in group
/// o / (Cout / groups)), plus the bias, then relu when asked; 'same' pads as
/// TensorFlow (the extra pixel after).
std::vector<float> reference(const Tensor& x, const std::vector<float>& kernel, const std::vector<float>& bias,
                             Shape ys, int kh, int kw, int stride, int dilation, bool same, int groups, bool relu) {
  const Shape xs = x.shape();
  const int cin_g = xs.c / groups, cout_g = ys.c / groups;
  const int span_h = (kh - 1) * dilation + 1, span_w = (kw - 1) * dilation + 1;
  const int top = same ? std::max(0, (ys.h - 1) * stride + span_h - xs.h) / 2 : 0;
  const int left = same ? std::max(0, (ys.w - 1) * stride + span_w - xs.w) / 2 : 0;
  std::vector<float> y(ys.numel());
  for (int n = 0; n < xs.n; ++n)
    for (int i = 0; i < ys.h; ++i)
      for (int j = 0; j < ys.w; ++j)
        for (int o = 0; o < ys.c; ++o) {
          const int g = o / cout_g;
          double s = bias.empty() ? 0.0 : bias[size_t(o)];
          for (int a = 0; a < kh; ++a)
            for (int b = 0; b < kw; ++b) {
              const int r = i * stride + a * dilation - top, c = j * stride + b * dilation - left;
              if (r < 0 || c < 0 || r >= xs.h || c >= xs.w) continue;
              for (int ci = 0; ci < cin_g; ++ci)
                s += double(x.data()[((size_t(n) * xs.h + r) * xs.w + c) * xs.c + size_t(g * cin_g + ci)]) *
                     kernel[((size_t(a) * kw + b) * cin_g + size_t(ci)) * ys.c + size_t(o)];
            }
          y[((size_t(n) * ys.h + i) * ys.w + j) * ys.c + size_t(o)] = float(relu ? std::max(0.0, s) : s);
        }
  return y;
}

void check_forward(const std::string& yaml, Shape xs, Shape want, int kh, int kw, int stride, int dilation,
                   bool same, int groups, bool relu) {
  INFO(yaml << " on " << xs.nhwc());
  auto layer = layer_from_yaml(yaml);
  BoundWeights w = bind_random(*layer, {xs}, 11);
  const Tensor x = random_tensor(xs, 12);
  const Tensor y = forward(*layer, x);
  REQUIRE(y.shape() == want);
  const std::vector<float> ref = reference(x, w.params[0], w.params.size() > 1 ? w.params[1] : std::vector<float>{},
                                           want, kh, kw, stride, dilation, same, groups, relu);
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, double(std::abs(y.data()[i] - ref[i])));
  CHECK(worst < 1e-5);
}

void check_gradients(const std::string& yaml, Shape xs) {
  INFO(yaml << " on " << xs.nhwc());
  auto layer = layer_from_yaml(yaml);
  BoundWeights w = bind_random(*layer, {xs}, 21);
  Context ctx;
  ctx.training = true;
  const GradCheckResult r = gradcheck(*layer, w, {random_tensor(xs, 22)}, ctx, 1e-2f, 300);
  CHECK(r.max_rel_error_inputs < 1e-2);
  CHECK(r.max_rel_error_params < 1e-2);
}

}  // namespace

TEST_CASE("DepthwiseConv2D convolves each channel alone with depth_multiplier kernels", "[conv][depthwise]") {
  // Output channel c * M + m reads input channel c only: groups = Cin, Cout = Cin * M.
  check_forward("{type: DepthwiseConv2D, kernel_size: 3, depth_multiplier: 2, padding: same, activation: relu}",
                Shape{2, 7, 6, 3}, Shape{2, 7, 6, 6}, 3, 3, 1, 1, true, 3, true);
  check_forward("{type: DepthwiseConv2D, kernel_size: 3, strides: 2, padding: same}",  // padded 0 before, 1 after
                Shape{2, 8, 9, 4}, Shape{2, 4, 5, 4}, 3, 3, 2, 1, true, 4, false);
  check_forward("{type: DepthwiseConv2D, kernel_size: 3, dilation_rate: 2, use_bias: false}", Shape{1, 9, 8, 2},
                Shape{1, 5, 4, 2}, 3, 3, 1, 2, false, 2, false);
  check_forward("{type: DepthwiseConv2D, kernel_size: [3, 2], depth_multiplier: 3, strides: 2, padding: same}",
                Shape{2, 7, 8, 2}, Shape{2, 4, 4, 6}, 3, 2, 2, 1, true, 2, false);  // kh != kw, multiplier, stride
  check_forward("{type: DepthwiseConv2D, kernel_size: 3, dilation_rate: 2, padding: same}", Shape{1, 8, 9, 3},
                Shape{1, 8, 9, 3}, 3, 3, 1, 2, true, 3, false);
  check_gradients("{type: DepthwiseConv2D, kernel_size: 3, depth_multiplier: 2, padding: same}", Shape{2, 6, 5, 3});
  check_gradients("{type: DepthwiseConv2D, kernel_size: 3, strides: 2, padding: same, use_bias: false}",
                  Shape{1, 7, 8, 4});

  // Keras's weights: depthwise_kernel [kh, kw, Cin, M] (fans of that shape) and bias [Cin * M]:
  // keras.layers.DepthwiseConv2D(3, depth_multiplier=2) on 8 channels has 3*3*8*2 + 16 = 160 parameters.
  auto layer = layer_from_yaml("{type: DepthwiseConv2D, kernel_size: 3, depth_multiplier: 2, "
                               "depthwise_initializer: he_normal, depthwise_regularizer: {type: L2, l2: 0.01}}");
  CHECK(layer->infer({Shape{1, 10, 10, 8}}) == Shape{1, 8, 8, 16});
  const std::vector<ParamSpec> specs = layer->param_specs();
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].name == "depthwise_kernel");
  CHECK(specs[0].shape == std::vector<int>{3, 3, 8, 2});
  CHECK(specs[0].initializer == "he_normal");
  CHECK(specs[0].fan_in == 72);
  CHECK(specs[0].fan_out == 18);
  CHECK(specs[0].regularizer.l2 == Approx(0.01));
  CHECK(specs[1].shape == std::vector<int>{16});
  CHECK(specs[0].numel() + specs[1].numel() == 160);
  CHECK(layer->type() == "DepthwiseConv2D");

  CHECK_THROWS_WITH(layer_from_yaml("{type: DepthwiseConv2D, kernel_size: 3, filters: 8}"),
                    Catch::Contains("use depth_multiplier"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: DepthwiseConv2D, kernel_size: 3, kernel_initializer: zeros}"),
                    Catch::Contains("kernel_initializer"));
}

TEST_CASE("Conv2D groups convolves each group of channels alone, as Keras's groups", "[conv][depthwise]") {
  check_forward("{type: Conv2D, filters: 6, kernel_size: 3, groups: 2, padding: same, activation: relu}",
                Shape{2, 6, 7, 4}, Shape{2, 6, 7, 6}, 3, 3, 1, 1, true, 2, true);
  check_forward("{type: Conv2D, filters: 4, kernel_size: 3, groups: 4, strides: 2}", Shape{1, 9, 9, 8},
                Shape{1, 4, 4, 4}, 3, 3, 2, 1, false, 4, false);
  check_forward("{type: Conv2D, filters: 4, kernel_size: [2, 3], groups: 2, dilation_rate: 2}", Shape{1, 8, 7, 4},
                Shape{1, 6, 3, 4}, 2, 3, 1, 2, false, 2, false);
  check_gradients("{type: Conv2D, filters: 6, kernel_size: 3, groups: 3, padding: same}", Shape{2, 5, 6, 6});
  // A grouped 1x1 stride-2 convolution takes the workaround of oneDNN issue 6035 too (cpu/conv_primitives.h).
  check_gradients("{type: Conv2D, filters: 16, kernel_size: 1, strides: 2, groups: 4}", Shape{2, 9, 9, 16});
  // keras.layers.Conv2D(8, 3, groups=4) on 16 channels: 3*3*4*8 + 8 = 296 parameters, kernel [3, 3, 4, 8].
  auto layer = layer_from_yaml("{type: Conv2D, filters: 8, kernel_size: 3, groups: 4}");
  layer->infer({Shape{1, 8, 8, 16}});
  const std::vector<ParamSpec> specs = layer->param_specs();
  CHECK(specs[0].shape == std::vector<int>{3, 3, 4, 8});
  CHECK(specs[0].numel() + specs[1].numel() == 296);
  auto bad = layer_from_yaml("{type: Conv2D, filters: 6, kernel_size: 3, groups: 4}");
  CHECK_THROWS_WITH(bad->infer({Shape{1, 8, 8, 8}}), Catch::Contains("groups 4 must divide") &&
                                                          Catch::Contains("6 filters"));
}

TEST_CASE("SeparableConv2D is a DepthwiseConv2D then a 1x1 Conv2D, with Keras's three weights", "[conv][depthwise]") {
  const Shape xs{2, 9, 8, 3};
  auto sep = layer_from_yaml("{type: SeparableConv2D, filters: 5, kernel_size: 3, depth_multiplier: 2, strides: 2, "
                             "padding: same, activation: relu}");
  BoundWeights w = bind_random(*sep, {xs}, 31);
  REQUIRE(w.specs.size() == 3);
  CHECK(w.specs[0].name == "depthwise_kernel");
  CHECK(w.specs[0].shape == std::vector<int>{3, 3, 3, 2});
  CHECK(w.specs[1].name == "pointwise_kernel");
  CHECK(w.specs[1].shape == std::vector<int>{1, 1, 6, 5});
  CHECK(w.specs[1].fan_in == 6);
  CHECK(w.specs[1].fan_out == 5);
  CHECK(w.specs[2].shape == std::vector<int>{5});
  // The same weights in the two layers it stands for.
  auto dw = layer_from_yaml("{type: DepthwiseConv2D, kernel_size: 3, depth_multiplier: 2, strides: 2, padding: same, "
                            "use_bias: false}");
  auto pw = layer_from_yaml("{type: Conv2D, filters: 5, kernel_size: 1, activation: relu}");
  BoundWeights wd = bind_random(*dw, {xs}, 1), wp = bind_random(*pw, {Shape{2, 5, 4, 6}}, 2);
  wd.params[0] = w.params[0];
  wp.params[0] = w.params[1];
  wp.params[1] = w.params[2];
  dw->bind({wd.params[0].data()}, {wd.grads[0].data()});
  pw->bind({wp.params[0].data(), wp.params[1].data()}, {wp.grads[0].data(), wp.grads[1].data()});
  const Tensor x = random_tensor(xs, 32);
  const Tensor y = forward(*sep, x), want = forward(*pw, forward(*dw, x));
  REQUIRE(y.shape() == Shape{2, 5, 4, 5});
  REQUIRE(want.shape() == y.shape());
  double worst = 0, largest = 0;
  for (size_t i = 0; i < y.numel(); ++i) {
    worst = std::max(worst, double(std::abs(y.data()[i] - want.data()[i])));
    largest = std::max(largest, double(std::abs(want.data()[i])));
  }
  CHECK(worst < 1e-5);
  CHECK(largest > 0.1);  // not all zero after the relu
  check_gradients("{type: SeparableConv2D, filters: 4, kernel_size: 3, depth_multiplier: 2, strides: 2, padding: same}",
                  Shape{2, 7, 6, 3});
  check_gradients("{type: SeparableConv2D, filters: 3, kernel_size: [3, 2], use_bias: false, activation: tanh}",
                  Shape{1, 6, 5, 4});

  // keras.layers.SeparableConv2D(16, 3, depth_multiplier=2) on 8 channels: 3*3*8*2 + 16*16 + 16 = 416 parameters.
  auto keras = layer_from_yaml("{type: SeparableConv2D, filters: 16, kernel_size: 3, depth_multiplier: 2, "
                               "pointwise_initializer: he_uniform}");
  keras->infer({Shape{1, 12, 12, 8}});
  size_t params = 0;
  for (const ParamSpec& s : keras->param_specs()) params += s.numel();
  CHECK(params == 416);
  CHECK(keras->param_specs()[1].initializer == "he_uniform");
  CHECK(keras->param_specs()[0].initializer == "glorot_uniform");
  CHECK_THROWS_WITH(layer_from_yaml("{type: SeparableConv2D, kernel_size: 3}"), Catch::Contains("filters"));
}

TEST_CASE("SeparableConv2D's backward takes the training forward's values after an inference forward in between",
          "[conv][depthwise]") {
  const Shape xs{2, 5, 4, 3};
  auto sep = layer_from_yaml("{type: SeparableConv2D, filters: 2, kernel_size: 3, padding: same}");
  BoundWeights w = bind_random(*sep, {xs}, 41);
  const Tensor x = random_tensor(xs, 42), dy = random_tensor(Shape{2, 5, 4, 2}, 43);
  Context train;
  train.training = true;
  Tensor y, dx;
  auto backward = [&] {
    sep->backward(train, {&x}, y, dy, {&dx});
    return std::make_pair(std::vector<float>(dx.data(), dx.data() + dx.numel()), w.grads);
  };
  sep->forward(train, {&x}, y);
  const auto want = backward();
  // A validation-like forward of another batch size (it once overwrote the kept depthwise output).
  const Tensor other = random_tensor(Shape{1, 5, 4, 3}, 44);
  Tensor unused;
  sep->forward(Context{}, {&other}, unused);
  CHECK(backward() == want);
}
