// The CPU convolutions that run on other oneDNN primitives than its direct
// convolutions: Winograd F(4x4, 3x3) for fp32 3x3 convolutions with many
// channels (backend/cpu/conv_algorithm.h), inner products for transposed
// convolutions whose kernel equals their strides
// (backend/cpu/patch_deconv_primitives.h). Forward, input gradient, kernel
// and bias gradients against a double-precision reference computed here by
// their definitions, on shapes that take those paths (checked).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "backend/cpu/conv_algorithm.h"
#include "backend/cpu/conv_primitives.h"
#include "backend/cpu/patch_deconv_primitives.h"
#include "backend/ops.h"
#include "gpu_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// Calls its argument f(x index, kernel index, y index) for every product of
/// a convolution-like op.
using TapVisitor = std::function<void(const std::function<void(size_t, size_t, size_t)>&)>;

/// One convolution-like op with ReLU (x [N, H, W, Cin], y and dy [N, Ho, Wo,
/// Cout], a Keras kernel, bias [Cout]), its products listed by taps, and its
/// results by the definitions in double.
struct OpCase {
  Shape xs, ys;
  std::vector<float> x, kernel, bias, dy;
  TapVisitor taps;
  std::vector<double> y, dx, dkernel, dbias;

  size_t xi(int n, int i, int j, int c) const { return ((size_t(n) * xs.h + i) * xs.w + j) * xs.c + c; }
  size_t yi(int n, int i, int j, int o) const { return ((size_t(n) * ys.h + i) * ys.w + j) * ys.c + o; }

  /// y = relu(sum of products + b), dz = dy where y > 0, dx and dkernel the
  /// products' sums with dz, db = sum dz.
  void reference() {
    y.assign(ys.numel(), 0), dx.assign(xs.numel(), 0), dkernel.assign(kernel.size(), 0), dbias.assign(ys.c, 0);
    taps([&](size_t s, size_t k, size_t d) { y[d] += double(x[s]) * kernel[k]; });
    std::vector<double> dz(ys.numel());
    for (size_t d = 0; d < y.size(); ++d) {
      y[d] = std::max(0.0, y[d] + bias[d % ys.c]);
      dz[d] = y[d] > 0 ? dy[d] : 0;
      dbias[d % ys.c] += dz[d];
    }
    taps([&](size_t s, size_t k, size_t d) {
      dx[s] += dz[d] * kernel[k];
      dkernel[k] += double(x[s]) * dz[d];
    });
  }
};

/// c's inputs, random; kernel_size values in [-0.2, 0.2].
void randomize(OpCase& c, size_t kernel_size) {
  c.x = random_values(c.xs.numel(), 1);
  c.kernel = random_values(kernel_size, 2, -0.2f, 0.2f);
  c.bias = random_values(c.ys.c, 3, -0.1f, 0.1f);
  c.dy = random_values(c.ys.numel(), 4);
}

/// A 3x3 stride-1 Conv2D (kernel [3, 3, Cin, Cout]) of x xs with `filters`, 'same' or 'valid'.
OpCase conv3x3(Shape xs, int filters, bool same) {
  OpCase c;
  c.xs = xs;
  c.ys = Shape{xs.n, xs.h - (same ? 0 : 2), xs.w - (same ? 0 : 2), filters};
  randomize(c, size_t(9) * xs.c * filters);
  const int pad = same ? 1 : 0;
  c.taps = [c, pad](const auto& f) {
    for (int n = 0; n < c.ys.n; ++n)
      for (int i = 0; i < c.ys.h; ++i)
        for (int j = 0; j < c.ys.w; ++j)
          for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) {
              const int si = i + a - pad, sj = j + b - pad;
              if (si < 0 || sj < 0 || si >= c.xs.h || sj >= c.xs.w) continue;
              for (int ch = 0; ch < c.xs.c; ++ch)
                for (int o = 0; o < c.ys.c; ++o)
                  f(c.xi(n, si, sj, ch), ((size_t(a) * 3 + b) * c.xs.c + ch) * c.ys.c + o, c.yi(n, i, j, o));
            }
  };
  return c;
}

/// A Conv2DTranspose with kernel [kh, kw, Cout, Cin] equal to its strides:
/// input pixel (i, j) times the kernel is output patch (i kh + a, j kw + b).
OpCase patch_deconv(Shape xs, int filters, int kh, int kw) {
  OpCase c;
  c.xs = xs;
  c.ys = Shape{xs.n, xs.h * kh, xs.w * kw, filters};
  randomize(c, size_t(kh) * kw * xs.c * filters);
  c.taps = [c, kh, kw](const auto& f) {
    for (int n = 0; n < c.xs.n; ++n)
      for (int i = 0; i < c.xs.h; ++i)
        for (int j = 0; j < c.xs.w; ++j)
          for (int a = 0; a < kh; ++a)
            for (int b = 0; b < kw; ++b)
              for (int o = 0; o < c.ys.c; ++o)
                for (int ch = 0; ch < c.xs.c; ++ch)
                  f(c.xi(n, i, j, ch), ((size_t(a) * kw + b) * c.ys.c + o) * c.xs.c + ch,
                    c.yi(n, i * kh + a, j * kw + b, o));
  };
  return c;
}

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

/// Runs c through op (Conv2DOp or Conv2DTransposeOp) on the CPU with ReLU
/// and compares with c.reference() within tol of each result's largest value.
template <class Op>
void check_against_reference(Op& op, OpCase& c, double tol) {
  const Device cpu{};
  c.reference();
  Tensor xt = make_tensor(c.xs, c.x, cpu), yt(c.ys), dyt = make_tensor(c.ys, c.dy, cpu), dxt(c.xs);
  const Activation relu{ActivationKind::Relu};
  op.forward(cpu, xt.view(), ConvWeights{c.kernel.data(), c.bias.data()}, relu, yt.view());
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
  op.backward(cpu, a);
  CHECK(relative_gap(download(yt), c.y) < tol);
  CHECK(relative_gap(download(dxt), c.dx) < tol);
  CHECK(relative_gap(dkernel, c.dkernel) < tol);
  CHECK(relative_gap(dbias, c.dbias) < tol);
}

void check_conv3x3(OpCase& c, bool same, double tol) {
  Conv2DParams p;
  p.kh = p.kw = 3;
  p.same_padding = same;
  Conv2DOp op(p);
  check_against_reference(op, c, tol);
}

/// The oneDNN problem the CPU backend builds for a 3x3 stride-1 convolution of c.
cpu::ConvProblem problem_of(const OpCase& c) {
  cpu::ConvProblem pb;
  pb.src = {c.xs.n, c.xs.c, c.xs.h, c.xs.w};
  pb.dst = {c.ys.n, c.ys.c, c.ys.h, c.ys.w};
  pb.weights = {c.ys.c, c.xs.c, 3, 3};
  pb.bias = {c.ys.c};
  pb.strides = {1, 1};
  pb.dilates = {0, 0};
  const dnnl::memory::dim pad = c.ys.h == c.xs.h ? 1 : 0;  // 'same' or 'valid'
  pb.pad_l = pb.pad_r = {pad, pad};
  return pb;
}

}  // namespace

TEST_CASE("CPU 3x3 convolutions with many channels run on Winograd and match the definition", "[conv]") {
  using Prims = cpu::ConvPrimitives<dnnl::convolution_forward, dnnl::convolution_backward_data,
                                    dnnl::convolution_backward_weights>;
  for (bool same : {true, false}) {
    OpCase c = conv3x3(Shape{2, 18, 18, 32}, 48, same);
    INFO((same ? "same" : "valid") << " padding, x " << c.xs.nhwc() << ", y " << c.ys.nhwc());
    cpu::ConvProblem pb = problem_of(c);
    REQUIRE(cpu::winograd_pays(pb));
    pb.algo = dnnl::algorithm::convolution_winograd;
    if (!Prims::fast_kernels(pb)) WARN("oneDNN has no Winograd kernels on this CPU (AVX-512): checked on the direct path");
    // Winograd's transforms round more than the direct sums (about 1.3e-6
    // of the largest value here, where the direct path gives 5e-7).
    check_conv3x3(c, same, 4e-6);
  }
}

TEST_CASE("CPU 3x3 convolutions with few channels stay on the direct algorithm and match the definition",
          "[conv]") {
  OpCase c = conv3x3(Shape{2, 9, 7, 16}, 8, true);
  REQUIRE_FALSE(cpu::winograd_pays(problem_of(c)));
  check_conv3x3(c, true, 1e-6);
}

TEST_CASE("CPU transposed convolutions whose kernel equals their strides run as inner products and match the definition",
          "[conv]") {
  struct Case {
    Shape xs;
    int filters, kh, kw;
  };
  for (const Case& k : {Case{{2, 5, 6, 32}, 16, 2, 2}, Case{{1, 4, 3, 5}, 3, 2, 3}}) {
    Conv2DParams p;
    p.kh = p.stride_h = k.kh;
    p.kw = p.stride_w = k.kw;
    REQUIRE(cpu::patch_deconv(p));
    OpCase c = patch_deconv(k.xs, k.filters, k.kh, k.kw);
    INFO("x " << c.xs.nhwc() << ", y " << c.ys.nhwc());
    Conv2DTransposeOp op(p);
    check_against_reference(op, c, 1e-6);
  }
}
