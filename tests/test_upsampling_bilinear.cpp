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
  for (const char* size : {"2", "[3, 2]"}) {
    INFO("size " << size);
    auto l = layer_from_yaml(std::string("{type: UpSampling2D, interpolation: bilinear, size: ") + size + "}");
    auto w = bind_random(*l, {Shape{0, 4, 3, 2}}, 1);
    CHECK(gradcheck(*l, w, {random_tensor({2, 4, 3, 2}, 5)}, {}).max_rel_error_inputs < 1e-3);
    // <up(x), dy> = <x, up^T(dy)> for random x and dy.
    const Tensor x = random_tensor({2, 4, 3, 2}, 6);
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
