// Conv2D, Conv2DTranspose and MaxPooling2D: shape inference and config errors,
// forward values against independent references (OpenCV's dnn module for
// Conv2D and MaxPooling2D, the adjoint identity and hand-computed values for
// Conv2DTranspose), and backward against central finite differences.
#include <catch2/catch.hpp>
#include <opencv2/dnn.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"
#include "layer_testing.h"
#include "nn/activation.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

Tensor run_forward(Layer& layer, const Tensor& x, bool training = false) {
  Context ctx;
  ctx.training = training;
  Tensor y;
  layer.forward(ctx, {&x}, y);
  return y;
}

/// NHWC tensor -> 4-D NCHW cv::Mat.
cv::Mat to_nchw(const Tensor& t) {
  const Shape s = t.shape();
  int dims[4] = {s.n, s.c, s.h, s.w};
  cv::Mat m(4, dims, CV_32F);
  for (int n = 0; n < s.n; ++n)
    for (int y = 0; y < s.h; ++y)
      for (int x = 0; x < s.w; ++x)
        for (int c = 0; c < s.c; ++c)
          m.ptr<float>(n, c)[y * s.w + x] = t.data()[((size_t(n) * s.h + y) * s.w + x) * s.c + c];
  return m;
}

/// Largest |a - b| between an NHWC tensor and a 4-D NCHW cv::Mat of the same shape.
double max_abs_diff(const Tensor& t, const cv::Mat& m) {
  const Shape s = t.shape();
  REQUIRE(m.dims == 4);
  REQUIRE(m.size[0] == s.n);
  REQUIRE(m.size[1] == s.c);
  REQUIRE(m.size[2] == s.h);
  REQUIRE(m.size[3] == s.w);
  double worst = 0;
  for (int n = 0; n < s.n; ++n)
    for (int y = 0; y < s.h; ++y)
      for (int x = 0; x < s.w; ++x)
        for (int c = 0; c < s.c; ++c)
          worst = std::max(worst, std::abs(double(m.ptr<float>(n, c)[y * s.w + x]) -
                                           t.data()[((size_t(n) * s.h + y) * s.w + x) * s.c + c]));
  return worst;
}

cv::Mat run_opencv(const std::string& type, cv::dnn::LayerParams lp, const cv::Mat& input) {
  cv::dnn::Net net;
  net.addLayerToPrev("layer", type, lp);
  net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  net.setInput(input);
  return net.forward().clone();
}

/// A pooling layer's YAML with this window, strides and padding.
std::string pool_yaml(const std::string& type, int ph, int pw, int sh, int sw, bool same) {
  return "{type: " + type + ", pool_size: [" + std::to_string(ph) + ", " + std::to_string(pw) + "], strides: [" +
         std::to_string(sh) + ", " + std::to_string(sw) + "], padding: " + (same ? "same" : "valid") + "}";
}

/// OpenCV dnn's Pooling parameters ("max" or "ave") for a window and strides.
cv::dnn::LayerParams pooling_params(const char* pool, int ph, int pw, int sh, int sw, bool same) {
  cv::dnn::LayerParams lp;
  lp.set("pool", pool);
  lp.set("kernel_h", ph);
  lp.set("kernel_w", pw);
  lp.set("stride_h", sh);
  lp.set("stride_w", sw);
  lp.set("pad_mode", same ? "SAME" : "VALID");
  return lp;
}

double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (size_t i = 0; i < a.numel(); ++i) s += double(a.data()[i]) * b.data()[i];
  return s;
}

/// A tensor whose values are distinct and at least `gap` apart (a shuffled
/// ramp), so a finite difference of size < gap/2 never changes which element
/// of a pooling window is the maximum.
Tensor distinct_tensor(Shape s, unsigned seed, float gap) {
  Tensor t(s);
  std::vector<int> order(t.numel());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (size_t i = 0; i < t.numel(); ++i) t.data()[i] = (order[i] - float(t.numel()) / 2) * gap;
  return t;
}

void check_gradients(const std::string& yaml, Shape xs, float h = 1e-2f, double tol = 1e-2,
                     bool distinct_inputs = false) {
  INFO(yaml << " on " << xs.nhwc());
  auto layer = layer_from_yaml(yaml);
  auto w = bind_random(*layer, {xs}, 7);
  Tensor x = distinct_inputs ? distinct_tensor(xs, 3, 0.01f) : random_tensor(xs, 3);
  Context ctx;
  ctx.training = true;
  GradCheckResult r = gradcheck(*layer, w, {x}, ctx, h, 300);
  CHECK(r.max_rel_error_inputs < tol);
  CHECK(r.max_rel_error_params < tol);
}

}  // namespace

TEST_CASE("Conv2D shape inference, params and config errors", "[conv]") {
  auto l = layer_from_yaml("{type: Conv2D, filters: 4, kernel_size: 3}");
  CHECK(l->infer({Shape{1, 5, 6, 2}}) == Shape{1, 3, 4, 4});
  auto specs = l->param_specs();
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].name == "kernel");
  CHECK(specs[0].shape == std::vector<int>{3, 3, 2, 4});
  CHECK(specs[0].initializer == "glorot_uniform");
  CHECK(specs[0].fan_in == 18);
  CHECK(specs[0].fan_out == 36);
  CHECK(specs[1].name == "bias");
  CHECK(specs[1].shape == std::vector<int>{4});
  CHECK(specs[1].initializer == "zeros");

  auto s = layer_from_yaml(
      "{type: Conv2D, filters: 2, kernel_size: [3, 2], strides: 2, padding: same, use_bias: false,"
      " kernel_initializer: he_normal}");
  CHECK(s->infer({Shape{1, 7, 6, 3}}) == Shape{1, 4, 3, 2});
  specs = s->param_specs();
  REQUIRE(specs.size() == 1);
  CHECK(specs[0].shape == std::vector<int>{3, 2, 3, 2});
  CHECK(specs[0].initializer == "he_normal");

  auto v = layer_from_yaml("{type: Conv2D, filters: 1, kernel_size: [2, 3], strides: [2, 1]}");
  CHECK(v->infer({Shape{1, 7, 7, 1}}) == Shape{1, 3, 5, 1});

  auto big = layer_from_yaml("{type: Conv2D, filters: 1, kernel_size: 5}");
  CHECK_THROWS_WITH(big->infer({Shape{1, 3, 3, 1}}),
                    Catch::Contains("input is 3x3 but kernel_size is 5x5") &&
                        Catch::Contains("padding: same"));
  CHECK_THROWS_AS(big->infer({Shape{1, 3, 3, 1}, Shape{1, 3, 3, 1}}), UserError);

  CHECK_THROWS_WITH(layer_from_yaml("{type: Conv2D, kernel_size: 3}"), Catch::Contains("filters"));
  CHECK_THROWS_AS(layer_from_yaml("{type: Conv2D, filters: 0, kernel_size: 3}"), UserError);
  CHECK_THROWS_WITH(layer_from_yaml("{type: Conv2D, filters: 1, kernel_size: 3, padding: full}"),
                    Catch::Contains("padding"));
  CHECK_THROWS_AS(
      layer_from_yaml("{type: Conv2D, filters: 1, kernel_size: 3, kernel_initializer: magic}"),
      UserError);
}

TEST_CASE("Conv2D dilation_rate: Keras's output sizes, fans and errors", "[conv]") {
  // Keras: the dilated kernel spans (k - 1) * d + 1 pixels; fans count taps.
  auto v = layer_from_yaml("{type: Conv2D, filters: 4, kernel_size: 3, dilation_rate: 2}");
  CHECK(v->infer({Shape{1, 9, 8, 2}}) == Shape{1, 5, 4, 4});
  auto specs = v->param_specs();
  CHECK(specs[0].shape == std::vector<int>{3, 3, 2, 4});
  CHECK(specs[0].fan_in == 18);
  auto s = layer_from_yaml("{type: Conv2D, filters: 1, kernel_size: [3, 2], dilation_rate: [2, 3], padding: same}");
  CHECK(s->infer({Shape{1, 7, 6, 3}}) == Shape{1, 7, 6, 1});
  const LayerDescription d = s->describe();
  CHECK(d.dilation_h == 2);
  CHECK(d.dilation_w == 3);
  CHECK((d.pad_h.before == 2 && d.pad_h.after == 2));  // span 5: total 4
  CHECK((d.pad_w.before == 1 && d.pad_w.after == 2));  // span 4: total 3, the extra pixel after

  auto big = layer_from_yaml("{type: Conv2D, filters: 1, kernel_size: 3, dilation_rate: 3}");
  CHECK_THROWS_WITH(big->infer({Shape{1, 6, 6, 1}}),
                    Catch::Contains("kernel_size is 3x3 (spanning 7x7 with dilation_rate 3x3)") &&
                        Catch::Contains("padding: same"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Conv2D, filters: 1, kernel_size: 3, dilation_rate: 2, strides: 2}"),
                    Catch::Contains("'dilation_rate' is 2x2 with strides 2x2, which Keras does not allow"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Conv2D, filters: 1, kernel_size: 3, dilation_rate: 0}"),
                    Catch::Contains("'dilation_rate' must be in [1, 1024]"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Conv2DTranspose, filters: 1, kernel_size: 3, dilation_rate: 2}"),
                    Catch::Contains("dilated Conv2DTranspose is not supported"));
  CHECK_NOTHROW(layer_from_yaml("{type: Conv2DTranspose, filters: 1, kernel_size: 3, dilation_rate: 1}"));
}

TEST_CASE("Conv2DTranspose shape inference and Keras fans", "[conv]") {
  auto u = layer_from_yaml("{type: Conv2DTranspose, filters: 8, kernel_size: 2, strides: 2}");
  CHECK(u->infer({Shape{1, 4, 5, 16}}) == Shape{1, 8, 10, 8});
  auto specs = u->param_specs();
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].shape == std::vector<int>{2, 2, 8, 16});
  CHECK(specs[0].fan_in == 8 * 4);
  CHECK(specs[0].fan_out == 16 * 4);

  auto v = layer_from_yaml("{type: Conv2DTranspose, filters: 1, kernel_size: 3, strides: 2}");
  CHECK(v->infer({Shape{1, 4, 5, 1}}) == Shape{1, 9, 11, 1});
  auto s = layer_from_yaml(
      "{type: Conv2DTranspose, filters: 1, kernel_size: 3, strides: 2, padding: same}");
  CHECK(s->infer({Shape{1, 4, 5, 1}}) == Shape{1, 8, 10, 1});
  auto k1 = layer_from_yaml("{type: Conv2DTranspose, filters: 1, kernel_size: 1, strides: 3}");
  CHECK(k1->infer({Shape{1, 2, 3, 1}}) == Shape{1, 6, 9, 1});
}

TEST_CASE("MaxPooling2D shape inference and config errors", "[conv]") {
  auto d = layer_from_yaml("{type: MaxPooling2D}");
  CHECK(d->infer({Shape{1, 5, 4, 3}}) == Shape{1, 2, 2, 3});
  CHECK(d->param_specs().empty());
  auto s = layer_from_yaml("{type: MaxPooling2D, pool_size: 2, padding: same}");
  CHECK(s->infer({Shape{1, 5, 4, 3}}) == Shape{1, 3, 2, 3});
  auto st = layer_from_yaml("{type: MaxPooling2D, pool_size: [3, 2], strides: 1}");
  CHECK(st->infer({Shape{1, 5, 4, 3}}) == Shape{1, 3, 3, 3});
  auto big = layer_from_yaml("{type: MaxPooling2D, pool_size: 4}");
  CHECK_THROWS_WITH(big->infer({Shape{1, 3, 8, 1}}),
                    Catch::Contains("input is 3x8 but pool_size is 4x4"));
  CHECK_THROWS_AS(layer_from_yaml("{type: MaxPooling2D, pool_size: 0}"), UserError);
  CHECK_THROWS_AS(layer_from_yaml("{type: MaxPooling2D, padding: causal}"), UserError);
}

TEST_CASE("Conv2D forward matches OpenCV dnn Convolution", "[conv]") {
  struct Case {
    int kh, kw, sh, sw;
    bool same;
    Shape xs;
    int dh = 1, dw = 1;
  };
  const Case cases[] = {{3, 3, 1, 1, true, {2, 5, 6, 3}},        {3, 2, 2, 2, true, {2, 6, 7, 3}},
                        {4, 4, 1, 1, true, {1, 5, 5, 2}},        {2, 3, 2, 1, false, {2, 7, 6, 3}},
                        {3, 3, 2, 2, false, {1, 8, 8, 4}},       {3, 3, 1, 1, true, {2, 9, 8, 3}, 2, 2},
                        {3, 2, 1, 1, false, {1, 9, 10, 2}, 2, 3}, {2, 2, 1, 1, true, {1, 7, 8, 3}, 3, 2}};
  for (const Case& c : cases) {
    const int filters = 5;
    std::string yaml = "{type: Conv2D, filters: 5, kernel_size: [" + std::to_string(c.kh) + ", " +
                       std::to_string(c.kw) + "], strides: [" + std::to_string(c.sh) + ", " +
                       std::to_string(c.sw) + "], dilation_rate: [" + std::to_string(c.dh) + ", " +
                       std::to_string(c.dw) + "], padding: " + (c.same ? "same" : "valid") + "}";
    INFO(yaml << " on " << c.xs.nhwc());
    auto layer = layer_from_yaml(yaml);
    auto w = bind_random(*layer, {c.xs}, 11);
    Tensor x = random_tensor(c.xs, 5);
    Tensor y = run_forward(*layer, x);

    // OpenCV wants the kernel as [out, in, kh, kw]; ours is [kh, kw, in, out].
    const int cin = c.xs.c;
    int wdims[4] = {filters, cin, c.kh, c.kw};
    cv::Mat kernel(4, wdims, CV_32F);
    for (int o = 0; o < filters; ++o)
      for (int i = 0; i < cin; ++i)
        for (int a = 0; a < c.kh; ++a)
          for (int b = 0; b < c.kw; ++b)
            kernel.ptr<float>(o, i)[a * c.kw + b] = w.params[0][((a * c.kw + b) * cin + i) * filters + o];
    cv::Mat bias(1, filters, CV_32F, w.params[1].data());
    cv::dnn::LayerParams lp;
    lp.set("kernel_h", c.kh);
    lp.set("kernel_w", c.kw);
    lp.set("stride_h", c.sh);
    lp.set("stride_w", c.sw);
    lp.set("dilation_h", c.dh);
    lp.set("dilation_w", c.dw);
    Tensor input = x;
    if (c.same && (c.dh > 1 || c.dw > 1)) {
      // OpenCV's 'SAME' ignores the dilation and it refuses asymmetric pads:
      // TensorFlow's padding of the span (k - 1) * d + 1 (stride 1, the
      // extra pixel after) is added to the input, which is then convolved 'valid'.
      const int th = (c.kh - 1) * c.dh, tw = (c.kw - 1) * c.dw;
      input = Tensor(Shape{c.xs.n, c.xs.h + th, c.xs.w + tw, c.xs.c});
      std::fill(input.data(), input.data() + input.numel(), 0.f);
      for (int n = 0; n < c.xs.n; ++n)
        for (int i = 0; i < c.xs.h; ++i)
          for (int j = 0; j < c.xs.w; ++j)
            for (int ch = 0; ch < c.xs.c; ++ch)
              input.data()[((size_t(n) * input.shape().h + i + th / 2) * input.shape().w + j + tw / 2) * c.xs.c + ch] =
                  x.data()[((size_t(n) * c.xs.h + i) * c.xs.w + j) * c.xs.c + ch];
    }
    lp.set("pad_mode", c.same && input.shape() == x.shape() ? "SAME" : "VALID");
    lp.set("num_output", filters);
    lp.set("bias_term", true);
    lp.blobs = {kernel, bias.clone()};
    cv::Mat ref = run_opencv("Convolution", lp, to_nchw(input));
    CHECK(max_abs_diff(y, ref) < 1e-4);
  }
}

TEST_CASE("AveragePooling2D matches OpenCV dnn's average Pooling (padding not counted), and its gradients",
          "[conv]") {
  struct Case {
    int ph, pw, sh, sw;
    bool same;
    Shape xs;
  };
  const Case cases[] = {{2, 2, 2, 2, false, {2, 5, 7, 3}},  // Keras's defaults
                        {2, 2, 2, 2, true, {2, 5, 7, 3}},   // odd sizes: the extra pixel after
                        {3, 3, 2, 2, true, {1, 6, 5, 2}},
                        {3, 2, 1, 1, true, {1, 6, 5, 2}},
                        {3, 2, 1, 2, false, {1, 6, 5, 2}},
                        {2, 2, 3, 3, false, {1, 8, 7, 2}},   // strides above the pool: pixels in no window
                        {2, 2, 3, 3, true, {1, 7, 7, 2}}};
  for (const Case& c : cases) {
    const std::string yaml = pool_yaml("AveragePooling2D", c.ph, c.pw, c.sh, c.sw, c.same);
    INFO(yaml << " on " << c.xs.nhwc());
    auto layer = layer_from_yaml(yaml);
    layer->infer({c.xs});
    Tensor x = random_tensor(c.xs, 9);
    Tensor y = run_forward(*layer, x);
    cv::dnn::LayerParams lp = pooling_params("ave", c.ph, c.pw, c.sh, c.sw, c.same);
    lp.set("ave_pool_padded_area", false);
    cv::Mat ref = run_opencv("Pooling", lp, to_nchw(x));
    CHECK(max_abs_diff(y, ref) < 1e-6);
    check_gradients(yaml, c.xs, 1e-2f, 1e-3);
  }
  // A corner window of 3x3 'same' on 2x2 holds 4 pixels: their mean, not sum / 9.
  auto l = layer_from_yaml("{type: AveragePooling2D, pool_size: 3, strides: 1, padding: same}");
  l->infer({Shape{1, 2, 2, 1}});
  Tensor x(Shape{1, 2, 2, 1});
  for (int i = 0; i < 4; ++i) x.data()[i] = float(i + 1);
  CHECK(run_forward(*l, x).data()[0] == 2.5f);
  CHECK(layer_from_yaml("{type: AveragePooling2D}")->infer({Shape{1, 5, 4, 3}}) == Shape{1, 2, 2, 3});
  CHECK_THROWS_WITH(layer_from_yaml("{type: AveragePooling2D, pool_size: 4}")->infer({Shape{1, 3, 8, 1}}),
                    Catch::Contains("input is 3x8 but pool_size is 4x4"));
}

TEST_CASE("MaxPooling2D forward matches OpenCV dnn Pooling", "[conv]") {
  struct Case {
    int ph, pw, sh, sw;
    bool same;
    Shape xs;
  };
  const Case cases[] = {{2, 2, 2, 2, false, {2, 5, 7, 3}},
                        {2, 2, 2, 2, true, {2, 5, 7, 3}},
                        {3, 3, 2, 2, true, {1, 6, 5, 2}},
                        {3, 2, 1, 2, false, {1, 6, 5, 2}}};
  for (const Case& c : cases) {
    const std::string yaml = pool_yaml("MaxPooling2D", c.ph, c.pw, c.sh, c.sw, c.same);
    INFO(yaml << " on " << c.xs.nhwc());
    auto layer = layer_from_yaml(yaml);
    layer->infer({c.xs});
    Tensor x = random_tensor(c.xs, 9);
    Tensor y = run_forward(*layer, x, false);
    Tensor yt = run_forward(*layer, x, true);
    cv::Mat ref = run_opencv("Pooling", pooling_params("max", c.ph, c.pw, c.sh, c.sw, c.same), to_nchw(x));
    CHECK(max_abs_diff(y, ref) == 0);
    CHECK(max_abs_diff(yt, ref) == 0);
  }
}

TEST_CASE("Conv2DTranspose with kernel 2, stride 2 matches hand-computed values", "[conv]") {
  // Each input pixel (i, j) writes its own 2x2 block: y[2i+a, 2j+b, o] =
  // sum_c x[i, j, c] * kernel[a, b, o, c] + bias[o].
  const Shape xs{2, 3, 2, 3};
  const int filters = 2;
  auto layer = layer_from_yaml("{type: Conv2DTranspose, filters: 2, kernel_size: 2, strides: 2}");
  auto w = bind_random(*layer, {xs}, 21);
  Tensor x = random_tensor(xs, 22);
  Tensor y = run_forward(*layer, x);
  REQUIRE(y.shape() == Shape{2, 6, 4, 2});
  double worst = 0;
  for (int n = 0; n < xs.n; ++n)
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 4; ++j)
        for (int o = 0; o < filters; ++o) {
          double ref = w.params[1][o];
          for (int c = 0; c < xs.c; ++c)
            ref += double(x.data()[((n * 3 + i / 2) * 2 + j / 2) * 3 + c]) *
                   w.params[0][(((i % 2) * 2 + j % 2) * filters + o) * xs.c + c];
          worst = std::max(worst, std::abs(ref - y.data()[((n * 6 + i) * 4 + j) * filters + o]));
        }
  CHECK(worst < 1e-5);
}

TEST_CASE("Conv2DTranspose is the adjoint of Conv2D with the same kernel", "[conv]") {
  // TensorFlow defines conv2d_transpose as the gradient of conv2d: for the
  // same kernel array and geometry, <conv(v), u> = <conv_transpose(u), v>.
  // Conv2D is checked against OpenCV above, so this pins the transposed
  // convolution's values, output size and asymmetric padding.
  struct Case {
    int k, s;
    bool same;
    Shape us;
  };
  const Case cases[] = {{2, 2, false, {2, 3, 4, 3}}, {3, 2, true, {2, 3, 4, 3}},
                        {3, 2, false, {1, 3, 4, 2}}, {4, 3, true, {1, 3, 2, 2}},
                        {2, 3, false, {1, 3, 2, 2}}, {1, 2, true, {1, 3, 3, 2}}};
  for (const Case& c : cases) {
    std::string geom = ", kernel_size: " + std::to_string(c.k) + ", strides: " +
                       std::to_string(c.s) + ", padding: " + (c.same ? "same" : "valid") +
                       ", use_bias: false}";
    INFO(geom << " on " << c.us.nhwc());
    const int out_c = 4;
    auto t = layer_from_yaml("{type: Conv2DTranspose, filters: 4" + geom);
    auto wt = bind_random(*t, {c.us}, 31);
    Tensor u = random_tensor(c.us, 32);
    Tensor tu = run_forward(*t, u);
    Shape vs = tu.shape();
    auto conv = layer_from_yaml("{type: Conv2D, filters: " + std::to_string(c.us.c) + geom);
    REQUIRE(conv->infer({vs.with_batch(1)}) == c.us.with_batch(1));
    REQUIRE(vs.c == out_c);
    // Same array: Conv2D's [k, k, in=out_c, out=us.c] is the transpose's [k, k, out_c, us.c].
    conv->bind({wt.params[0].data()}, {wt.grads[0].data()});
    Tensor v = random_tensor(vs, 33);
    Tensor cv_ = run_forward(*conv, v);
    double a = dot(cv_, u), b = dot(tu, v);
    CHECK(std::abs(a - b) < 1e-4 * std::max(1.0, std::abs(a)));
  }
}

TEST_CASE("Conv2D gradients match finite differences", "[conv]") {
  check_gradients("{type: Conv2D, filters: 3, kernel_size: 3, padding: same}", Shape{2, 5, 4, 2});
  check_gradients("{type: Conv2D, filters: 3, kernel_size: [3, 2], strides: 2, padding: same}",
                  Shape{2, 6, 7, 3});
  check_gradients("{type: Conv2D, filters: 2, kernel_size: 4, padding: same}", Shape{1, 5, 5, 2});
  check_gradients("{type: Conv2D, filters: 2, kernel_size: [2, 3], strides: [2, 1], use_bias: false}",
                  Shape{2, 7, 6, 3});
  check_gradients("{type: Conv2D, filters: 3, kernel_size: 3, activation: relu}", Shape{2, 6, 5, 2},
                  1e-3f, 2e-2);
  check_gradients("{type: Conv2D, filters: 2, kernel_size: 3, activation: sigmoid, padding: same}",
                  Shape{1, 4, 5, 2});
  check_gradients("{type: Conv2D, filters: 2, kernel_size: 3, activation: elu, padding: same}", Shape{1, 4, 5, 2});
  check_gradients("{type: Conv2D, filters: 2, kernel_size: 3, activation: tanh, padding: same}", Shape{1, 4, 5, 2});
  check_gradients("{type: Conv2D, filters: 2, kernel_size: 3, dilation_rate: 2, padding: same}", Shape{2, 6, 7, 2});
  check_gradients("{type: Conv2D, filters: 3, kernel_size: [2, 3], dilation_rate: [3, 2], use_bias: false}",
                  Shape{1, 7, 8, 2});
}

TEST_CASE("Conv2DTranspose gradients match finite differences", "[conv]") {
  check_gradients("{type: Conv2DTranspose, filters: 3, kernel_size: 2, strides: 2}",
                  Shape{2, 3, 4, 4});
  check_gradients("{type: Conv2DTranspose, filters: 2, kernel_size: 3, strides: 2, padding: same}",
                  Shape{2, 3, 4, 3});
  check_gradients("{type: Conv2DTranspose, filters: 2, kernel_size: 3, strides: 2, use_bias: false}",
                  Shape{1, 3, 3, 3});
  check_gradients("{type: Conv2DTranspose, filters: 2, kernel_size: [2, 3], strides: 3}",
                  Shape{1, 2, 3, 2});
  check_gradients(
      "{type: Conv2DTranspose, filters: 2, kernel_size: 3, strides: 2, padding: same,"
      " activation: relu}",
      Shape{1, 3, 4, 3}, 1e-3f, 2e-2);
}

TEST_CASE("MaxPooling2D gradients match finite differences", "[conv]") {
  check_gradients("{type: MaxPooling2D}", Shape{2, 5, 7, 3}, 1e-3f, 1e-2, true);
  check_gradients("{type: MaxPooling2D, padding: same}", Shape{2, 5, 7, 3}, 1e-3f, 1e-2, true);
  check_gradients("{type: MaxPooling2D, pool_size: 3, strides: 2, padding: same}",
                  Shape{1, 6, 5, 2}, 1e-3f, 1e-2, true);
}

TEST_CASE("Conv2D without input gradient and with a new batch size", "[conv]") {
  // dx may be nullptr (first conv after Input); a later batch of another size
  // must give the same per-sample results as before.
  auto layer = layer_from_yaml("{type: Conv2D, filters: 3, kernel_size: 3, padding: same}");
  auto w = bind_random(*layer, {Shape{1, 5, 5, 2}}, 41);
  Tensor x = random_tensor(Shape{3, 5, 5, 2}, 42);
  Tensor y = run_forward(*layer, x, true);
  Tensor dy = random_tensor(y.shape(), 43);
  Context ctx;
  ctx.training = true;
  layer->backward(ctx, {&x}, y, dy, {nullptr});
  std::vector<float> g3 = w.grads[0];

  Tensor x1(Shape{1, 5, 5, 2});
  std::copy(x.sample(2), x.sample(2) + x1.numel(), x1.data());
  Tensor y1 = run_forward(*layer, x1, true);
  REQUIRE(y1.shape() == Shape{1, 5, 5, 3});
  for (size_t i = 0; i < y1.numel(); ++i) REQUIRE(y1.data()[i] == Approx(y.sample(2)[i]).margin(1e-5));
  Tensor dy1(y1.shape());
  std::copy(dy.sample(2), dy.sample(2) + dy1.numel(), dy1.data());
  Tensor dx1;
  layer->backward(ctx, {&x1}, y1, dy1, {&dx1});
  CHECK(dx1.shape() == x1.shape());
  // The 3-sample kernel gradient differs from the 1-sample one (samples add up).
  double diff = 0;
  for (size_t i = 0; i < g3.size(); ++i) diff = std::max(diff, double(std::abs(g3[i] - w.grads[0][i])));
  CHECK(diff > 1e-3);
}

TEST_CASE("strip_output_activation turns Conv2D and Conv2DTranspose outputs into logits", "[conv]") {
  for (const char* type : {"Conv2D", "Conv2DTranspose"}) {
    INFO(type);
    auto layer = layer_from_yaml(std::string("{type: ") + type +
                                 ", filters: 2, kernel_size: 3, activation: sigmoid}");
    const BoundWeights weights = bind_random(*layer, {Shape{1, 5, 5, 2}}, 51);
    Tensor x = random_tensor(Shape{1, 5, 5, 2}, 52);
    Tensor p = run_forward(*layer, x);
    CHECK_FALSE(layer->has_softmax());
    CHECK(layer->strip_output_activation() == OutputActivation::Sigmoid);
    Tensor z = run_forward(*layer, x);
    for (size_t i = 0; i < z.numel(); ++i) REQUIRE(stable_sigmoid(z.data()[i]) == Approx(p.data()[i]));
    CHECK(layer->strip_output_activation() == OutputActivation::None);
  }
  auto relu = layer_from_yaml("{type: Conv2D, filters: 1, kernel_size: 1, activation: relu}");
  CHECK(relu->strip_output_activation() == OutputActivation::None);
}

TEST_CASE("activation: softmax normalizes over the channels and strips to its logits", "[conv]") {
  const Shape in{2, 5, 5, 3};
  for (const char* yaml : {"{type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: softmax}",
                           "{type: Conv2DTranspose, filters: 4, kernel_size: 3, activation: softmax}",
                           "{type: Dense, units: 4, activation: softmax}", "{type: Activation, activation: softmax}",
                           "{type: Softmax}", "{type: Softmax, axis: 3}"}) {
    INFO(yaml);
    auto layer = layer_from_yaml(yaml);
    const BoundWeights weights = bind_random(*layer, {in}, 53);
    Tensor x = random_tensor(in, 54);
    const Tensor p = run_forward(*layer, x);
    CHECK(layer->has_softmax());
    CHECK(layer->strip_output_activation() == OutputActivation::Softmax);
    CHECK_FALSE(layer->has_softmax());
    const Tensor z = run_forward(*layer, x);
    REQUIRE(z.shape() == p.shape());
    const int k = z.shape().c;
    for (size_t px = 0; px < z.numel() / size_t(k); ++px) {
      const float* zp = z.data() + px * size_t(k);
      double mx = zp[0], sum = 0, psum = 0;
      for (int j = 1; j < k; ++j) mx = std::max<double>(mx, zp[j]);
      for (int j = 0; j < k; ++j) sum += std::exp(zp[j] - mx);
      for (int j = 0; j < k; ++j) {
        // margin: a probability below float's normal range may be flushed to 0 (oneDNN's denormal mode).
        REQUIRE(p.data()[px * size_t(k) + size_t(j)] ==
                Approx(std::exp(zp[j] - mx) / sum).epsilon(1e-5).margin(1e-12));
        psum += p.data()[px * size_t(k) + size_t(j)];
      }
      REQUIRE(psum == Approx(1.0).epsilon(1e-6));
    }
  }
  CHECK_THROWS_WITH(layer_from_yaml("{type: Softmax, axis: 1}"), Catch::Contains("only the channel axis"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Conv2D, filters: 2, kernel_size: 1, activation: log_softmax}"),
                    Catch::Contains("end the model with 'softmax'"));
}

namespace {

/// dkernel of a 1x1 layer with stride s from x [N, H, W, Cin] and dy, by the
/// definition: Conv2D (Keras kernel [1, 1, Cin, Cout]) pairs dy[n, i, j] with
/// x[n, s*i, s*j]; Conv2DTranspose (kernel [1, 1, Cout, Cin]) pairs
/// dy[n, s*i, s*j] with x[n, i, j] (its other outputs are bias only).
std::vector<double> naive_1x1_dkernel(bool transpose, const Tensor& x, const Tensor& dy, int s) {
  const Shape xs = x.shape(), ys = dy.shape();
  const Shape& small = transpose ? xs : ys;  // the grid of the products
  std::vector<double> dk(size_t(xs.c) * ys.c, 0.0);
  for (int n = 0; n < small.n; ++n)
    for (int i = 0; i < small.h; ++i)
      for (int j = 0; j < small.w; ++j) {
        const int xi = transpose ? i : s * i, xj = transpose ? j : s * j;
        const int yi = transpose ? s * i : i, yj = transpose ? s * j : j;
        const float* xp = x.data() + ((size_t(n) * xs.h + xi) * xs.w + xj) * xs.c;
        const float* gp = dy.data() + ((size_t(n) * ys.h + yi) * ys.w + yj) * ys.c;
        for (int c = 0; c < xs.c; ++c)
          for (int o = 0; o < ys.c; ++o)
            dk[transpose ? size_t(o) * xs.c + c : size_t(c) * ys.c + o] += double(xp[c]) * gp[o];
      }
  return dk;
}

}  // namespace

TEST_CASE("1x1 strided convolutions with few channels get the right kernel gradient, every step", "[conv]") {
  // oneDNN 2.x's 1x1 backward-weights kernels overrun their workspace for
  // strided NHWC problems whose input has fewer channels than their block (8
  // on AVX2), which hung (or crashed, or miscomputed) training in about half
  // of the runs of such a Conv2DTranspose (uxlfoundation/oneDNN issue 6035;
  // cpu/conv_primitives.h, strided_1x1). Repeated steps at the sizes that
  // hung: each must finish and match the definition.
  struct Case {
    const char* yaml;
    bool transpose;
    Shape xs;
  } cases[] = {
      {"{type: Conv2DTranspose, filters: 4, kernel_size: 1, strides: 2}", true, Shape{4, 21, 21, 16}},
      {"{type: Conv2D, filters: 8, kernel_size: 1, strides: 2}", false, Shape{4, 42, 42, 4}},
      {"{type: Conv2D, filters: 16, kernel_size: 1, strides: 2, padding: same}", false, Shape{4, 41, 41, 2}},
  };
  for (const Case& c : cases) {
    INFO(c.yaml << " on " << c.xs.nhwc());
    auto layer = layer_from_yaml(c.yaml);
    auto w = bind_random(*layer, {c.xs}, 5);
    Context ctx;
    ctx.training = true;
    for (int step = 0; step < 20; ++step) {
      const Tensor x = random_tensor(c.xs, 10 + unsigned(step));
      Tensor y;
      layer->forward(ctx, {&x}, y);
      const Tensor dy = random_tensor(y.shape(), 100 + unsigned(step));
      Tensor dx;
      layer->backward(ctx, {&x}, y, dy, {&dx});
      const std::vector<double> want = naive_1x1_dkernel(c.transpose, x, dy, 2);
      const std::vector<float>& got = w.grads[0];
      REQUIRE(got.size() == want.size());
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
      INFO("step " << step);
      CHECK(worst < 1e-3);
    }
  }
}
