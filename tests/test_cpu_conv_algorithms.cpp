// The CPU convolutions that run on other oneDNN algorithms than the direct
// one: Winograd F(4x4, 3x3) for fp32 3x3 convolutions with many channels
// (backend/cpu/conv_algorithm.h). Forward, input gradient, kernel and bias
// gradients against a double-precision reference computed here by their
// definitions, on a shape that takes the Winograd path (checked).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/conv_algorithm.h"
#include "backend/cpu/conv_primitives.h"
#include "backend/ops.h"
#include "gpu_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// One 3x3 stride-1 convolution's outputs and gradients: x [N, H, W, C],
/// kernel [3, 3, C, O] (Keras), y and dy [N, Ho, Wo, O].
struct Conv3x3 {
  Shape xs, ys;
  bool same = true;
  std::vector<float> x, kernel, bias, dy;
  std::vector<double> y, dx, dkernel, dbias;

  int pad() const { return same ? 1 : 0; }
  size_t xi(int n, int i, int j, int c) const { return ((size_t(n) * xs.h + i) * xs.w + j) * xs.c + c; }
  size_t yi(int n, int i, int j, int o) const { return ((size_t(n) * ys.h + i) * ys.w + j) * ys.c + o; }
  size_t ki(int a, int b, int c, int o) const { return ((size_t(a) * 3 + b) * xs.c + c) * ys.c + o; }

  /// Calls f(x index, kernel index, y index) for every product of the convolution.
  template <class F>
  void each_tap(F f) const {
    for (int n = 0; n < ys.n; ++n)
      for (int i = 0; i < ys.h; ++i)
        for (int j = 0; j < ys.w; ++j)
          for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) {
              const int si = i + a - pad(), sj = j + b - pad();
              if (si < 0 || sj < 0 || si >= xs.h || sj >= xs.w) continue;
              for (int c = 0; c < xs.c; ++c)
                for (int o = 0; o < ys.c; ++o) f(xi(n, si, sj, c), ki(a, b, c, o), yi(n, i, j, o));
            }
  }

  /// The definitions in double: y = relu(x * k + b), dz = dy where y > 0,
  /// dx = dz correlated back through k, dk = x correlated with dz, db = sum dz.
  void reference() {
    y.assign(ys.numel(), 0), dx.assign(xs.numel(), 0), dkernel.assign(kernel.size(), 0), dbias.assign(ys.c, 0);
    each_tap([&](size_t s, size_t k, size_t d) { y[d] += double(x[s]) * kernel[k]; });
    std::vector<double> dz(ys.numel());
    for (size_t d = 0; d < y.size(); ++d) {
      y[d] = std::max(0.0, y[d] + bias[d % ys.c]);
      dz[d] = y[d] > 0 ? dy[d] : 0;
      dbias[d % ys.c] += dz[d];
    }
    each_tap([&](size_t s, size_t k, size_t d) {
      dx[s] += dz[d] * kernel[k];
      dkernel[k] += double(x[s]) * dz[d];
    });
  }
};

/// max |got - want| / max |want|.
double relative_gap(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double gap = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    gap = std::max(gap, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return gap / scale;
}

/// Runs c through the CPU backend's Conv2DOp (ReLU) and compares with c.reference().
void check_against_reference(Conv3x3& c, double tol) {
  const Device cpu{};
  Conv2DParams p;
  p.kh = p.kw = 3;
  p.same_padding = c.same;
  c.reference();
  Tensor xt = make_tensor(c.xs, c.x, cpu), yt(c.ys), dyt = make_tensor(c.ys, c.dy, cpu), dxt(c.xs);
  Conv2DOp conv(p);
  const Activation relu{ActivationKind::Relu};
  conv.forward(cpu, xt.view(), ConvWeights{c.kernel.data(), c.bias.data()}, relu, yt.view());
  std::vector<float> dkernel(c.kernel.size()), dbias(c.bias.size());
  ConvBackwardArgs a;
  a.act = relu;
  a.y = yt.view();
  a.dy = dyt.raw();
  a.x = xt.view();
  a.kernel = c.kernel.data();
  a.dkernel = dkernel.data();
  a.dbias = dbias.data();
  a.dx = dxt.raw();
  conv.backward(cpu, a);
  CHECK(relative_gap(download(yt), c.y) < tol);
  CHECK(relative_gap(download(dxt), c.dx) < tol);
  CHECK(relative_gap(dkernel, c.dkernel) < tol);
  CHECK(relative_gap(dbias, c.dbias) < tol);
}

/// The oneDNN problem the CPU backend builds for c (what conv2d_op.cpp builds).
cpu::ConvProblem problem_of(const Conv3x3& c) {
  cpu::ConvProblem pb;
  pb.src = {c.xs.n, c.xs.c, c.xs.h, c.xs.w};
  pb.dst = {c.ys.n, c.ys.c, c.ys.h, c.ys.w};
  pb.weights = {c.ys.c, c.xs.c, 3, 3};
  pb.strides = {1, 1};
  pb.dilates = {0, 0};
  return pb;
}

Conv3x3 random_conv(Shape xs, int filters, bool same) {
  Conv3x3 c;
  c.xs = xs;
  c.same = same;
  c.ys = Shape{xs.n, xs.h - (same ? 0 : 2), xs.w - (same ? 0 : 2), filters};
  c.x = random_values(xs.numel(), 1);
  c.kernel = random_values(size_t(9) * xs.c * filters, 2, -0.2f, 0.2f);
  c.bias = random_values(filters, 3, -0.1f, 0.1f);
  c.dy = random_values(c.ys.numel(), 4);
  return c;
}

}  // namespace

TEST_CASE("CPU 3x3 convolutions with many channels run on Winograd and match the definition", "[conv]") {
  using Prims = cpu::ConvPrimitives<dnnl::convolution_forward, dnnl::convolution_backward_data,
                                    dnnl::convolution_backward_weights>;
  for (bool same : {true, false}) {
    Conv3x3 c = random_conv(Shape{2, 18, 18, 32}, 48, same);
    INFO((same ? "same" : "valid") << " padding, x " << c.xs.nhwc() << ", y " << c.ys.nhwc());
    cpu::ConvProblem pb = problem_of(c);
    REQUIRE(cpu::winograd_pays(pb));
    pb.algo = dnnl::algorithm::convolution_winograd;
    if (!Prims::fast_kernels(pb)) WARN("oneDNN has no Winograd kernels on this CPU (AVX-512): checked on the direct path");
    // Winograd's transforms round more than the direct sums (about 1.3e-6
    // of the largest value here, where the direct path gives 5e-7).
    check_against_reference(c, 4e-6);
  }
}

TEST_CASE("CPU 3x3 convolutions with few channels stay on the direct algorithm and match the definition",
          "[conv]") {
  Conv3x3 c = random_conv(Shape{2, 9, 7, 16}, 8, true);
  REQUIRE_FALSE(cpu::winograd_pays(problem_of(c)));
  check_against_reference(c, 1e-6);
}
