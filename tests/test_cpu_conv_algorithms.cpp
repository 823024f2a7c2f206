// The CPU convolutions that run on other oneDNN primitives than its direct
// convolutions: Winograd F(4x4, 3x3) for fp32 3x3 convolutions with many
// channels (backend/cpu/conv_algorithm.h), inner products for transposed
// convolutions whose kernel equals their strides
// (backend/cpu/patch_deconv_primitives.h). Forward, input gradient, kernel
// and bias gradients against a double-precision reference computed here by
// their definitions, on shapes that take those paths (checked), and over
// several steps on the same buffers, as the copies these ops keep between
// calls must follow.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "backend/cpu/cached_conv_op.h"
#include "backend/cpu/conv_algorithm.h"
#include "backend/cpu/conv_primitives.h"
#include "backend/cpu/patch_deconv_primitives.h"
#include "backend/device_ops.h"
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

/// c's inputs, random from seed; kernel_size values in [-0.2, 0.2].
void randomize(OpCase& c, size_t kernel_size, unsigned seed = 1) {
  c.x = random_values(c.xs.numel(), seed);
  c.kernel = random_values(kernel_size, seed + 1, -0.2f, 0.2f);
  c.bias = random_values(c.ys.c, seed + 2, -0.1f, 0.1f);
  c.dy = random_values(c.ys.numel(), seed + 3);
}

/// A 3x3 stride-1 Conv2D (kernel [3, 3, Cin, Cout]) of x xs with `filters`, 'same' or 'valid'.
OpCase conv3x3(Shape xs, int filters, bool same, unsigned seed = 1) {
  OpCase c;
  c.xs = xs;
  c.ys = Shape{xs.n, xs.h - (same ? 0 : 2), xs.w - (same ? 0 : 2), filters};
  randomize(c, size_t(9) * xs.c * filters, seed);
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
OpCase patch_deconv(Shape xs, int filters, int kh, int kw, unsigned seed = 1) {
  OpCase c;
  c.xs = xs;
  c.ys = Shape{xs.n, xs.h * kh, xs.w * kw, filters};
  randomize(c, size_t(kh) * kw * xs.c * filters, seed);
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

/// The tensors of a layer's step, reused from step to step as a network's are.
struct StepBuffers {
  Tensor x, y, dy, dx;
  StepBuffers(Shape xs, Shape ys) : x(xs), y(ys), dy(ys), dx(xs) {}
};

/// One training step of op (Conv2DOp or Conv2DTransposeOp) on the CPU with
/// ReLU on c's values, written into b's tensors, compared with c.reference()
/// within tol of each result's largest value; without `weights` (a frozen
/// layer) only dx.
template <class Op>
void check_step(Op& op, OpCase& c, StepBuffers& b, double tol, bool weights = true) {
  const Device cpu{};
  c.reference();
  std::copy(c.x.begin(), c.x.end(), b.x.data());
  std::copy(c.dy.begin(), c.dy.end(), b.dy.data());
  const Activation relu{ActivationKind::Relu};
  op.forward(cpu, b.x.view(), ConvWeights{c.kernel.data(), c.bias.data()}, relu, b.y.view());
  std::vector<float> dkernel(c.kernel.size()), dbias(c.bias.size());
  ConvBackwardArgs a;
  a.act = relu;
  a.y = b.y.view();
  a.dy = b.dy.raw();
  a.x = b.x.view();
  a.kernel = c.kernel.data();
  a.dkernel = weights ? dkernel.data() : nullptr;
  a.dbias = weights ? dbias.data() : nullptr;
  a.dx = b.dx.raw();
  op.backward(cpu, a);
  CHECK(relative_gap(download(b.y), c.y) < tol);
  CHECK(relative_gap(download(b.dx), c.dx) < tol);
  if (!weights) return;
  CHECK(relative_gap(dkernel, c.dkernel) < tol);
  CHECK(relative_gap(dbias, c.dbias) < tol);
}

/// check_step on fresh buffers.
template <class Op>
void check_against_reference(Op& op, OpCase& c, double tol) {
  StepBuffers b(c.xs, c.ys);
  check_step(op, c, b, tol);
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
  using ConvOp = cpu::CachedConvOp<cpu::ConvPrimitives<dnnl::convolution_forward, dnnl::convolution_backward_data,
                                                       dnnl::convolution_backward_weights>>;
  for (bool same : {true, false}) {
    OpCase c = conv3x3(Shape{2, 18, 18, 32}, 48, same);
    INFO((same ? "same" : "valid") << " padding, x " << c.xs.nhwc() << ", y " << c.ys.nhwc());
    REQUIRE(cpu::winograd_pays(problem_of(c)));
    Conv2DParams p;
    p.kh = p.kw = 3;
    p.same_padding = same;
    const auto backend = cpu::make_conv2d(Device{}, p);
    const auto* op = dynamic_cast<const ConvOp*>(backend.get());
    REQUIRE(op);
    const cpu::ConvProblem chosen = op->problem(cpu::ConvKey{c.xs, c.ys, true, DType::F32, DType::F32, true});
    if (chosen.algo != dnnl::algorithm::convolution_winograd) {
      WARN("skipped: oneDNN has no Winograd kernels on this CPU (they need AVX-512)");
      return;
    }
    // Its backward makes dz from the ReLU's y and dy straight in Winograd's layout, which the
    // check below then covers.
    cpu::ConvPrimitives<dnnl::convolution_forward, dnnl::convolution_backward_data, dnnl::convolution_backward_weights>
        prims(chosen);
    const std::vector<float> y(c.ys.numel()), dy(c.ys.numel());
    CHECK(prims.keep_relu_gradient(y.data(), dy.data(), 1, true, true));
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
  // Also a 1-pixel-wide input and a kernel 1 high, where T and y lie in memory alike.
  for (const Case& k : {Case{{2, 5, 6, 32}, 16, 2, 2}, Case{{1, 4, 3, 5}, 3, 2, 3}, Case{{2, 3, 1, 8}, 4, 2, 2},
                        Case{{1, 3, 4, 5}, 3, 1, 2}}) {
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

TEST_CASE("CPU convolutions that keep reordered inputs between calls see each step's new values", "[conv]") {
  // The same buffers with new contents each step, as a network's, and a frozen step between:
  // a Winograd convolution (its input and dz kept in oneDNN's layout) and a patch transposed
  // convolution (its dT kept).
  Conv2DParams conv;
  conv.kh = conv.kw = 3;
  conv.same_padding = true;
  Conv2DOp winograd(conv);
  StepBuffers wb(Shape{2, 16, 16, 32}, Shape{2, 16, 16, 32});
  Conv2DParams up;
  up.kh = up.kw = up.stride_h = up.stride_w = 2;
  Conv2DTransposeOp patches(up);
  StepBuffers pbuf(Shape{2, 4, 5, 16}, Shape{2, 8, 10, 8});
  for (unsigned step = 0; step < 4; ++step) {
    INFO("step " << step);
    const bool frozen = step == 2;
    OpCase c = conv3x3(wb.x.shape(), 32, true, 10 * step + 1);
    check_step(winograd, c, wb, 4e-6, !frozen);
    OpCase d = patch_deconv(pbuf.x.shape(), 8, 2, 2, 10 * step + 5);
    check_step(patches, d, pbuf, 1e-6, !frozen);
  }
}
