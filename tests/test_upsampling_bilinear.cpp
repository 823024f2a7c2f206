// Tests of UpSampling2D(interpolation='bilinear'): TensorFlow's half-pixel
// bilinear resize by hand at the edges and inside, OpenCV's cv::resize
// (INTER_LINEAR, the same half-pixel rule) as an outside reference for
// several factors and channel counts, the gradient against finite
// differences and as the adjoint of the forward, and the CUDA kernels against
// the CPU bit for bit (skipped without a GPU).
#include <catch2/catch.hpp>

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>

#include "backend/elementwise_ops.h"
#include "gpu_testing.h"
#include "layer_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

Tensor upsample(Layer& l, const Tensor& x) {
  Tensor y;
  l.forward(Context{}, {&x}, y);
  return y;
}

}  // namespace

TEST_CASE("bilinear UpSampling2D: TensorFlow's half-pixel centres, edges clamped", "[layers]") {
  auto l = layer_from_yaml("{type: UpSampling2D, interpolation: bilinear}");
  CHECK(l->infer({Shape{0, 1, 3, 1}}) == Shape{0, 2, 6, 1});
  CHECK(l->describe().bilinear);
  Tensor x(Shape{1, 1, 3, 1});
  const float v[] = {0, 4, 8};
  std::copy(v, v + 3, x.data());
  const Tensor y = upsample(*l, x);
  // Output j samples src = (j + 0.5) / 2 - 0.5: -0.25 (clamped to 0), 0.25, 0.75, 1.25, 1.75, 2.25 (clamped to 2).
  const std::vector<float> row = {0, 1, 3, 5, 7, 8};
  std::vector<float> want(row);
  want.insert(want.end(), row.begin(), row.end());  // one input row: both output rows equal it
  CHECK(std::vector<float>(y.data(), y.data() + y.numel()) == want);
}

TEST_CASE("bilinear UpSampling2D gives TensorFlow's bits (tf.image.resize 'bilinear', sizes [3, 2] and 3)",
          "[layers]") {
  // x [1, 2, 3, 2]: i * 0.37 - 1.1 in float32, the last value 3.3; the
  // expected values are TensorFlow 2.21's tf.image.resize(x, (2 sh, 3 sw),
  // method='bilinear') on the CPU, printed with 9 significant digits.
  Tensor x(Shape{1, 2, 3, 2});
  for (int i = 0; i < 12; ++i) x.data()[i] = float(i) * 0.37f - 1.1f;
  x.data()[11] = 3.3f;
  const std::vector<float> tf_3x2 = {
      -1.10000002f, -0.730000019f, -0.915000021f, -0.545000017f, -0.545000017f, -0.175000012f, -0.175000012f,
      0.194999993f, 0.194999993f,  0.564999998f,  0.379999995f,  0.75f,         -1.10000002f,  -0.730000019f,
      -0.915000021f, -0.545000017f, -0.545000017f, -0.175000012f, -0.175000012f, 0.194999993f,  0.194999993f,
      0.564999998f,  0.379999995f,  0.75f,         -0.359999955f, 0.0100001693f, -0.174999952f, 0.195000052f,
      0.195000052f,  0.565000057f,  0.565000057f,  0.962500095f,  0.935000062f,  1.38750005f,   1.12f,
      1.60000014f,   0.380000114f,  0.750000358f,  0.565000117f,  0.935000122f,  0.935000122f,  1.30500007f,
      1.30500007f,   1.73000026f,   1.67500019f,   2.21000028f,   1.86000001f,   2.45000029f,   1.12f,
      1.49000013f,   1.30500007f,   1.67500007f,   1.67499995f,   2.04500008f,   2.04500008f,   2.49749994f,
      2.41499996f,   3.03250003f,   2.5999999f,    3.29999995f,   1.12f,         1.49000013f,   1.30500007f,
      1.67500007f,   1.67499995f,   2.04500008f,   2.04500008f,   2.49749994f,   2.41499996f,   3.03250003f,
      2.5999999f,    3.29999995f};
  const std::vector<float> tf_3x3 = {
      -1.10000002f, -0.730000019f, -1.10000002f, -0.730000019f, -0.853333354f, -0.483333319f, -0.606666625f,
      -0.23666662f, -0.360000014f, 0.00999999046f, -0.113333315f, 0.25666669f, 0.133333385f, 0.50333339f,
      0.379999995f, 0.75f, 0.379999995f, 0.75f, -1.10000002f, -0.730000019f, -1.10000002f, -0.730000019f,
      -0.853333354f, -0.483333319f, -0.606666625f, -0.23666662f, -0.360000014f, 0.00999999046f, -0.113333315f,
      0.25666669f, 0.133333385f, 0.50333339f, 0.379999995f, 0.75f, 0.379999995f, 0.75f, -0.359999955f,
      0.0100001693f, -0.359999955f, 0.0100001693f, -0.113333285f, 0.25666675f, 0.133333445f, 0.503333449f,
      0.380000055f, 0.75000006f, 0.626666665f, 1.03333342f, 0.873333395f, 1.31666684f, 1.12f, 1.60000014f, 1.12f,
      1.60000014f, 0.380000114f, 0.750000358f, 0.380000114f, 0.750000358f, 0.626666784f, 0.996666789f,
      0.873333514f, 1.24333358f, 1.12000012f, 1.49000013f, 1.36666667f, 1.81000018f, 1.61333346f, 2.13000035f,
      1.86000001f, 2.45000029f, 1.86000001f, 2.45000029f, 1.12f, 1.49000013f, 1.12f, 1.49000013f, 1.36666667f,
      1.7366668f, 1.61333346f, 1.98333347f, 1.86000001f, 2.23000002f, 2.10666656f, 2.58666658f, 2.35333323f,
      2.94333339f, 2.5999999f, 3.29999995f, 2.5999999f, 3.29999995f, 1.12f, 1.49000013f, 1.12f, 1.49000013f,
      1.36666667f, 1.7366668f, 1.61333346f, 1.98333347f, 1.86000001f, 2.23000002f, 2.10666656f, 2.58666658f,
      2.35333323f, 2.94333339f, 2.5999999f, 3.29999995f, 2.5999999f, 3.29999995f};
  const std::pair<const char*, const std::vector<float>*> cases[] = {{"[3, 2]", &tf_3x2}, {"3", &tf_3x3}};
  for (const auto& [size, want] : cases) {
    INFO("size " << size);
    auto l = layer_from_yaml(std::string("{type: UpSampling2D, interpolation: bilinear, size: ") + size + "}");
    l->infer({Shape{0, 2, 3, 2}});
    const Tensor y = upsample(*l, x);
    REQUIRE(y.numel() == want->size());
    for (size_t i = 0; i < want->size(); ++i) {
      INFO("element " << i);
      CHECK(y.data()[i] == (*want)[i]);
    }
  }
}

TEST_CASE("bilinear UpSampling2D matches OpenCV's INTER_LINEAR resize", "[layers]") {
  struct Case {
    int sh, sw;
    Shape xs;
  };
  const Case cases[] = {{2, 2, {2, 5, 7, 3}}, {3, 2, {1, 4, 6, 1}}, {4, 4, {1, 3, 3, 8}}, {1, 3, {2, 6, 2, 2}}};
  for (const Case& c : cases) {
    INFO("size [" << c.sh << ", " << c.sw << "], x " << c.xs.nhwc());
    auto l = layer_from_yaml("{type: UpSampling2D, interpolation: bilinear, size: [" + std::to_string(c.sh) + ", " +
                             std::to_string(c.sw) + "]}");
    l->infer({c.xs.with_batch(0)});
    const Tensor x = random_tensor(c.xs, 21);
    const Tensor y = upsample(*l, x);
    REQUIRE(y.shape() == Shape{c.xs.n, c.xs.h * c.sh, c.xs.w * c.sw, c.xs.c});
    double worst = 0;
    for (int n = 0; n < c.xs.n; ++n) {
      const cv::Mat src(c.xs.h, c.xs.w, CV_32FC(c.xs.c), const_cast<float*>(x.data()) + x.shape().sample_numel() * n);
      cv::Mat dst;
      cv::resize(src, dst, cv::Size(c.xs.w * c.sw, c.xs.h * c.sh), 0, 0, cv::INTER_LINEAR);
      const float* got = y.data() + y.shape().sample_numel() * n;
      for (size_t i = 0; i < y.shape().sample_numel(); ++i)
        worst = std::max(worst, double(std::abs(got[i] - dst.ptr<float>()[i])));
    }
    CHECK(worst <= 1e-5);
  }
}

TEST_CASE("bilinear UpSampling2D's gradient: finite differences and the forward's adjoint", "[layers]") {
  struct Case {
    const char* size;
    Shape xs;
  };
  const Case cases[] = {{"2", {2, 4, 3, 2}}, {"[3, 2]", {2, 4, 3, 2}}, {"1", {1, 3, 2, 2}}, {"[1, 3]", {1, 1, 4, 3}},
                        {"3", {1, 5, 1, 1}}};
  for (const Case& c : cases) {
    INFO("size " << c.size << ", x " << c.xs.nhwc());
    auto l = layer_from_yaml(std::string("{type: UpSampling2D, interpolation: bilinear, size: ") + c.size + "}");
    auto w = bind_random(*l, {c.xs.with_batch(0)}, 1);
    CHECK(gradcheck(*l, w, {random_tensor(c.xs, 5)}, {}).max_rel_error_inputs < 1e-3);
    // <up(x), dy> = <x, up^T(dy)> for random x and dy.
    const Tensor x = random_tensor(c.xs, 6);
    const Tensor y = upsample(*l, x);
    const Tensor dy = random_tensor(y.shape(), 7);
    Tensor dx;
    l->backward(Context{}, {&x}, y, dy, {&dx});
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < y.numel(); ++i) lhs += double(y.data()[i]) * dy.data()[i];
    for (size_t i = 0; i < x.numel(); ++i) rhs += double(x.data()[i]) * dx.data()[i];
    CHECK(lhs == Approx(rhs).epsilon(1e-5));
  }
}

TEST_CASE("GPU bilinear UpSampling2D matches the CPU bit for bit", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  struct Case {
    UpSample2DParams p;
    Shape xs;
  };
  const Case cases[] = {{{2, 2}, {2, 9, 7, 5}}, {{3, 2}, {1, 4, 6, 16}}, {{4, 1}, {2, 3, 5, 3}}, {{2, 2}, {1, 32, 32, 64}}};
  for (const Case& c : cases) {
    INFO("size [" << c.p.sh << ", " << c.p.sw << "], x " << c.xs.nhwc());
    const Shape ys{c.xs.n, c.xs.h * c.p.sh, c.xs.w * c.p.sw, c.xs.c};
    const std::vector<float> xh = random_values(c.xs.numel(), 901), dyh = random_values(ys.numel(), 902);
    auto run = [&](const Device& d) {
      Buffer<float> x = upload(xh, d), y(d, ys.numel()), dy = upload(dyh, d), dx(d, c.xs.numel());
      upsample_bilinear_forward(d, x.data(), c.xs, c.p, y.data());
      upsample_bilinear_backward(d, dy.data(), c.xs, c.p, dx.data());
      return std::make_pair(download(y), download(dx));
    };
    const auto ref = run(Device{}), got = run(g.device);
    CHECK_IDENTICAL("forward", got.first, ref.first);
    CHECK_IDENTICAL("backward", got.second, ref.second);
  }
}
