// CPU-vs-CUDA parity of every backend op (backend/ops.h, elementwise_ops.h,
// train_ops.h), forward and backward: each test runs the same public call on
// the CPU (the oracle) and on GPU 0 with the same random inputs (fixed seeds)
// and compares the results at the tolerances stated below. Every step of an
// op is fed the same inputs on both devices (the CPU's intermediate values are
// not reused), so a failure names the step that differs. The ops that take
// bf16 activations on a GPU (convolutions, max pooling, accumulate,
// concatenation) are also run on bf16 tensors (on a bf16 tower for the
// convolutions, with fp32 x or y where a U-Net's first and last layers have
// them) against the CPU's fp32 result on the same inputs rounded to bf16 on
// the host, so that the difference is the GPU's arithmetic and the rounding
// of its bf16 results alone. Without a GPU every case skips with a warning.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/elementwise_ops.h"
#include "backend/ops.h"
#include "backend/train_ops.h"
#include "gpu_testing.h"
#include "nn/activation.h"
#include "train/metrics.h"
#if defined(TRAINER_WITH_CUDA)
#include "backend/cuda/cudnn_conv.h"
#endif

using namespace trainer;
using namespace trainer::testing;

namespace {

// ---- Tolerances ------------------------------------------------------------
// Each is a bound on max |gpu - cpu| / max |cpu| over one compared tensor
// (compare() in gpu_testing.h). Where none applies the results must be
// identical: copies, max selections, dropout masks, histogram counts, sums in
// a stated order, and single IEEE operations that both devices round alike.

/// Element-wise arithmetic: nvcc contracts a*b + c into one FMA (one rounding
/// less than the CPU's mul-then-add), a few ulps of float.
constexpr double kArith = 1e-6;
/// Element-wise math through expf / log1pf (sigmoid, BCE, the loss gradient):
/// CUDA's device functions are within 2 ulps of glibc's, a few ulps each.
constexpr double kTranscendental = 1e-5;
/// Float sums taken in another order (upsample and pooling backward, the
/// per-sample loss sums of float terms accumulated in double).
constexpr double kReorder = 1e-5;
/// Sums accumulated in double in another order (BN statistics).
constexpr double kDoubleSum = 1e-9;
/// A float result stored as bf16: rounding to nearest even moves a value by
/// at most half an ulp, 2^-8 of it (8-bit significand), so at most 2^-8 of
/// max |ref|; plus kReorder for the float sum before the rounding.
constexpr double kBf16Rounding = 1.0 / 256 + kReorder;

/// Convolutions (forward, backward data, backward weights) by precision.
/// fp32: another algorithm and summation order (Winograd / FFT transforms
/// included); 1e-4. tf32: inputs rounded to a 10-bit mantissa (u = 2^-11):
/// a simulated worst case over 4000 dot products of 8..4096 terms was 3.9e-4
/// of the largest output, so 2e-3. bf16: an 8-bit significand (u = 2^-8; a
/// simulated worst case recorded earlier was 2.8e-3), plus outputs that may
/// be rounded to bf16: 2e-2.
double conv_tolerance(Precision p) {
  switch (p) {
    case Precision::FP32: return 1e-4;
    case Precision::TF32: return 2e-3;
    case Precision::BF16: return 2e-2;
  }
  return 0;
}

/// A convolution result stored as t, out of a convolution run in p
/// (run_precision) on inputs that are bf16 values (the bf16 cases round x,
/// the kernel and dy on the host). fp32 / tf32: conv_tolerance(p), plus
/// kBf16Rounding for a bf16 result (bf16 values are exact in tf32, so the
/// rounding of the stored result is the one error added). bf16: 2e-2 as for
/// fp32 inputs, which allows for rounded outputs already; here the error is
/// the fp32 sums and at most two roundings to bf16 (cuDNN's bf16 output,
/// then the result after the bias), 2 * 2^-8 = 7.8e-3 of max |ref| where the
/// convolution before the bias is no larger than max |y|: 2e-2 leaves a
/// factor of about 2.5 for the bias's cancellation.
double conv_tolerance(Precision p, DType t) {
  return conv_tolerance(p) + (t == DType::BF16 && p != Precision::BF16 ? kBf16Rounding : 0);
}

// ---- Conv2D / Conv2DTranspose ---------------------------------------------

struct ConvCase {
  const char* name;
  bool transpose;
  int n, h, w, cin, cout;
  Conv2DParams p;
  bool bias;
  Shape xs() const { return Shape{n, h, w, cin}; }
  Shape ys() const {
    if (transpose)
      return Shape{n, conv_transpose_output_length(h, p.kh, p.stride_h, p.same_padding),
                   conv_transpose_output_length(w, p.kw, p.stride_w, p.same_padding), cout};
    return Shape{n, conv_output_length(h, p.span_h(), p.stride_h, p.same_padding),
                 conv_output_length(w, p.span_w(), p.stride_w, p.same_padding), cout};
  }
  size_t kernel_numel() const { return size_t(p.kh) * size_t(p.kw) * size_t(cin / p.groups) * size_t(cout); }
};

Conv2DParams conv_params(int k, int s, bool same) { return Conv2DParams{k, k, s, s, same}; }

const ConvCase kConvCases[] = {
    {"Conv2D 3x3 same stride 1, 3->16, bias", false, 2, 16, 16, 3, 16, conv_params(3, 1, true), true},
    {"Conv2D 3x3 same stride 1, 64->32, no bias", false, 2, 12, 12, 64, 32, conv_params(3, 1, true), false},
    {"Conv2D 1x1, 16->1, bias", false, 2, 9, 7, 16, 1, conv_params(1, 1, false), true},
    {"Conv2D 3x3 same stride 2, 15x16 input (W padded 0 before, 1 after), 8->16, bias", false, 2, 15, 16, 8, 16,
     conv_params(3, 2, true), true},
    {"Conv2D 2x2 same stride 1 (padded 0 before, 1 after), 4->8, no bias", false, 3, 7, 9, 4, 8,
     conv_params(2, 1, true), false},
    {"Conv2D 3x3 valid stride 1, 5->6, bias", false, 2, 10, 11, 5, 6, conv_params(3, 1, false), true},
    {"Conv2D 3x2 valid strides 2x1, 6->5, no bias", false, 2, 11, 9, 6, 5, Conv2DParams{3, 2, 2, 1, false},
     false},
    {"Conv2D 3x2 valid strides 2x1, 6->8 (bf16 runs in bf16), bias", false, 2, 11, 9, 6, 8,
     Conv2DParams{3, 2, 2, 1, false}, true},
    {"Conv2D 3x3 same dilation 2, 8->16, bias", false, 2, 13, 12, 8, 16, Conv2DParams{3, 3, 1, 1, true, 2, 2},
     true},
    {"Conv2D 2x3 same dilations 3x2 (span 4x5: H padded 1 before, 2 after), 4->8, no bias", false, 2, 9, 11, 4, 8,
     Conv2DParams{2, 3, 1, 1, true, 3, 2}, false},
    {"Conv2D 3x3 valid dilation 2, 6->5, bias", false, 2, 10, 9, 6, 5, Conv2DParams{3, 3, 1, 1, false, 2, 2}, true},
    {"DepthwiseConv2D 3x3 same, 8->16 (groups 8, multiplier 2), bias", false, 2, 10, 9, 8, 16,
     Conv2DParams{3, 3, 1, 1, true, 1, 1, 8}, true},
    {"DepthwiseConv2D 3x3 same stride 2 (padded 0 before, 1 after), 16->16 (groups 16), no bias", false, 2, 12, 11,
     16, 16, Conv2DParams{3, 3, 2, 2, true, 1, 1, 16}, false},
    {"DepthwiseConv2D 3x3 same dilation 2, 4->4 (groups 4), bias", false, 2, 9, 10, 4, 4,
     Conv2DParams{3, 3, 1, 1, true, 2, 2, 4}, true},
    {"Conv2D 3x3 valid groups 2, 6->8, no bias", false, 2, 9, 8, 6, 8, Conv2DParams{3, 3, 1, 1, false, 1, 1, 2},
     false},
    {"Conv2DTranspose 2x2 stride 2 valid (the U-Net's), 32->16, bias", true, 2, 8, 8, 32, 16,
     conv_params(2, 2, false), true},
    {"Conv2DTranspose 2x2 stride 2 same, 64->32, no bias", true, 2, 6, 5, 64, 32, conv_params(2, 2, true), false},
    {"Conv2DTranspose 3x3 stride 2 same (padded 0 before, 1 after), 8->4, bias", true, 2, 5, 6, 8, 4,
     conv_params(3, 2, true), true},
    {"Conv2DTranspose 3x3 stride 1 same, 3->16, bias", true, 2, 9, 8, 3, 16, conv_params(3, 1, true), true},
    {"Conv2DTranspose 3x3 stride 2 valid, 4->3, no bias", true, 3, 4, 5, 4, 3, conv_params(3, 2, false), false},
    {"Conv2DTranspose 3x3 stride 2 valid, 8->3 (bf16 runs in bf16), bias", true, 2, 4, 5, 8, 3,
     conv_params(3, 2, false), true},
    {"Conv2DTranspose 1x1, 16->8, bias", true, 2, 7, 6, 16, 8, conv_params(1, 1, false), true},
};

/// Host inputs of one conv case. y_act: the forward output that the fused
/// backward's activation gradient reads (empty: the device's own forward
/// output). The GPU runs get the CPU's, since ReLU's derivative flips where a
/// bf16 forward moves an output near 0 across it (about 1 in 1000 outputs, an
/// error of a whole dy element: a property of the kink, not of the backward).
struct ConvInputs {
  std::vector<float> x, kernel, bias, dy, y_act;
};

/// Host results of one conv case on one device.
struct ConvResults {
  std::vector<float> y;
  std::vector<float> y_first;  ///< Forward of sample 0 alone (a second shape on the same op).
  /// backward() with a linear activation (dz = dy), after the first forward.
  std::vector<float> dx, dkernel, dbias;
  /// backward() with the case's activation (ReLU with a bias) after a new
  /// forward, reading in.y_act when given; then again without dx.
  std::vector<float> act_dx, act_dkernel, act_dbias, act_dkernel_no_dx;
};

/// NaN in every element of b, so that a result the op does not write shows:
/// the word 0x7fc07fc0 is a float NaN and two bf16 NaNs (0x7fc0), so this
/// poisons a bf16 tensor's buffer() too.
void poison(Buffer<float>& b) {
  const uint32_t nan_bits = 0x7fc07fc0u;
  float nan = 0;
  std::memcpy(&nan, &nan_bits, sizeof nan);
  const std::vector<float> nans(b.size(), nan);
  device_copy(b.device(), b.data(), Device{}, nans.data(), nans.size() * sizeof(float));
}

/// A tensor of shape s and type t on d, poisoned.
Tensor poisoned_tensor(Shape s, DType t, const Device& d) {
  Tensor x(s, d);
  x.set_dtype(t);
  poison(x.buffer());
  return x;
}

/// Storage types of a convolution's x (and dx) and y (and dy).
struct ConvTypes {
  DType x = DType::F32, y = DType::F32;
};

/// Runs case c on d with x, dx of type t.x and y, dy of type t.y (the
/// inputs uploaded as that type: make_tensor rounds them for bf16), every
/// output poisoned before the call that writes it.
template <class Op>
ConvResults run_conv(const Device& d, const ConvCase& c, const ConvInputs& in, ConvTypes t) {
  const Shape xs = c.xs(), ys = c.ys();
  Op op(c.p);
  Tensor x = make_tensor(xs, in.x, d, t.x), dy = make_tensor(ys, in.dy, d, t.y);
  Buffer<float> kernel = upload(in.kernel, d), bias = upload(in.bias, d);
  Tensor y = poisoned_tensor(ys, t.y, d), dx = poisoned_tensor(xs, t.x, d);
  Buffer<float> dkernel(d, c.kernel_numel()), dbias(d, size_t(c.cout));
  const float* b = c.bias ? bias.data() : nullptr;
  float* db = c.bias ? dbias.data() : nullptr;
  // The cases with a bias also apply ReLU in the forward's epilogue; the others none.
  const Activation act = c.bias ? Activation{ActivationKind::Relu} : Activation{};
  const ConvWeights w{kernel.data(), b};
  ConvResults r;
  op.forward(d, x.view(), w, act, y.view());
  r.y = download(y);
  for (Buffer<float>* p : {&dx.buffer(), &dkernel, &dbias}) poison(*p);
  ConvBackwardArgs a;
  a.y = {nullptr, t.y, ys};
  a.dy = dy.raw();
  a.x = x.view();
  a.kernel = kernel.data();
  a.dkernel = dkernel.data();
  a.dbias = db;
  a.dx = dx.raw();
  op.backward(d, a);
  r.dx = download(dx), r.dkernel = download(dkernel);
  if (c.bias) r.dbias = download(dbias);
  Tensor y1 = poisoned_tensor(ys.with_batch(1), t.y, d);
  op.forward(d, {x.raw(), t.x, xs.with_batch(1)}, w, act, y1.view());
  r.y_first = download(y1);
  op.forward(d, x.view(), w, act, y.view());
  if (!in.y_act.empty()) y = make_tensor(ys, in.y_act, d, t.y);
  for (Buffer<float>* p : {&dx.buffer(), &dkernel, &dbias}) poison(*p);
  a.act = act;
  a.y = y.view();
  op.backward(d, a);
  r.act_dx = download(dx), r.act_dkernel = download(dkernel);
  if (c.bias) r.act_dbias = download(dbias);
  poison(dkernel);
  a.dx = nullptr;
  op.backward(d, a);
  r.act_dkernel_no_dx = download(dkernel);
  return r;
}

/// The precision case c's convolution runs in on a GPU set to p: bf16 runs
/// convolutions with fewer than 8 filters (cuDNN's K: Conv2D's output
/// channels, Conv2DTranspose's input channels) in tf32, checked here at
/// tf32's tighter tolerance.
Precision run_precision(Precision p, const ConvCase& c) {
#if defined(TRAINER_WITH_CUDA)
  return cuda::conv_precision(p, c.transpose ? c.cin : c.cout, c.p.groups);
#else
  (void)c;
  return p;
#endif
}

ConvResults run_conv_case(const Device& d, const ConvCase& c, const ConvInputs& in, ConvTypes t = {}) {
  return c.transpose ? run_conv<Conv2DTransposeOp>(d, c, in, t) : run_conv<Conv2DOp>(d, c, in, t);
}

/// Tolerances of one conv comparison: of y (and y_first), of dx, and of the
/// fp32 weight gradients dkernel and dbias.
struct ConvTolerances {
  double y, dx, weights;
};

/// CHECK_CLOSE of every result of case c against the reference.
void check_conv(const ConvCase& c, const ConvResults& got, const ConvResults& ref, ConvTolerances tol) {
  CHECK_CLOSE("forward y", got.y, ref.y, tol.y);
  CHECK_CLOSE("forward y of sample 0 alone", got.y_first, ref.y_first, tol.y);
  CHECK_CLOSE("backward (linear) dx", got.dx, ref.dx, tol.dx);
  CHECK_CLOSE("backward (linear) dkernel", got.dkernel, ref.dkernel, tol.weights);
  if (c.bias) CHECK_CLOSE("backward (linear) dbias", got.dbias, ref.dbias, tol.weights);
  CHECK_CLOSE("backward dx", got.act_dx, ref.act_dx, tol.dx);
  CHECK_CLOSE("backward dkernel", got.act_dkernel, ref.act_dkernel, tol.weights);
  CHECK_CLOSE("backward dkernel without dx", got.act_dkernel_no_dx, ref.act_dkernel_no_dx, tol.weights);
  if (c.bias) CHECK_CLOSE("backward dbias", got.act_dbias, ref.act_dbias, tol.weights);
}

// ---- MaxPooling2D ----------------------------------------------------------

struct PoolCase {
  const char* name;
  int n, h, w, c;
  Pool2DParams p;
  Shape xs() const { return Shape{n, h, w, c}; }
  Shape ys() const {
    return Shape{n, conv_output_length(h, p.ph, p.stride_h, p.same_padding),
                 conv_output_length(w, p.pw, p.stride_w, p.same_padding), c};
  }
  /// Whether an input element can lie in two windows (then its gradient is a sum).
  bool overlapping() const { return p.ph > p.stride_h || p.pw > p.stride_w; }
};

const PoolCase kPoolCases[] = {
    {"2x2 stride 2 valid, even 8x10", 2, 8, 10, 5, Pool2DParams{2, 2, 2, 2, false}},
    {"2x2 stride 2 valid, odd 9x7 (last row and column unused)", 2, 9, 7, 3, Pool2DParams{2, 2, 2, 2, false}},
    {"2x2 stride 2 same, odd 9x7 (padded after)", 2, 9, 7, 3, Pool2DParams{2, 2, 2, 2, true}},
    {"3x3 stride 2 same, 9x8 (overlapping windows, asymmetric padding)", 2, 9, 8, 4,
     Pool2DParams{3, 3, 2, 2, true}},
    {"3x3 stride 1 same, 5x6", 1, 5, 6, 2, Pool2DParams{3, 3, 1, 1, true}},
    {"2x2 stride 3 valid, 8x9 (windows skip rows and columns)", 2, 8, 9, 3, Pool2DParams{2, 2, 3, 3, false}},
    {"2x2 stride 3 same, 7x8", 2, 7, 8, 3, Pool2DParams{2, 2, 3, 3, true}},
};

struct PoolResults {
  std::vector<float> y_train, y_infer, dx;
};

/// Runs case c on d with every tensor of type t (the inputs uploaded as t:
/// make_tensor rounds them for bf16), each output poisoned before the call
/// that writes it.
PoolResults run_pool(const Device& d, const PoolCase& c, const std::vector<float>& xh, const std::vector<float>& dyh,
                     DType t = DType::F32) {
  const Shape xs = c.xs(), ys = c.ys();
  MaxPool2DOp op(c.p);
  Tensor x = make_tensor(xs, xh, d, t), dy = make_tensor(ys, dyh, d, t);
  Tensor y = poisoned_tensor(ys, t, d), dx = poisoned_tensor(xs, t, d);
  op.forward(d, x.view(), y.view(), false);
  PoolResults r;
  r.y_infer = download(y);
  poison(y.buffer());
  op.forward(d, x.view(), y.view(), true);
  r.y_train = download(y);
  op.backward(d, dy.view(), dx.view());
  r.dx = download(dx);
  return r;
}

}  // namespace

#if defined(TRAINER_WITH_CUDA)
TEST_CASE("bf16 convolutions with fewer than 8 filters run in tf32", "[gpu_ops]") {
  CHECK(cuda::conv_precision(Precision::BF16, 1) == Precision::TF32);
  CHECK(cuda::conv_precision(Precision::BF16, 7) == Precision::TF32);
  CHECK(cuda::conv_precision(Precision::BF16, 8) == Precision::BF16);
  CHECK(cuda::conv_precision(Precision::FP32, 1) == Precision::FP32);
  CHECK(cuda::conv_precision(Precision::TF32, 1) == Precision::TF32);
  // Grouped convolutions (DepthwiseConv2D, SeparableConv2D's depthwise part, Conv2D groups) run on fp32 tensors.
  CHECK(cuda::conv_precision(Precision::BF16, 16, 2) == Precision::TF32);
  CHECK(cuda::conv_precision(Precision::BF16, 64, 64) == Precision::TF32);
  CHECK(cuda::conv_precision(Precision::FP32, 16, 16) == Precision::FP32);
}
#endif

TEST_CASE("GPU Conv2D and Conv2DTranspose match the CPU in fp32, tf32 and bf16", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice fp32(0, Precision::FP32), tf32(0, Precision::TF32), bf16(0, Precision::BF16);
  const std::pair<Precision, const GpuDevice*> devices[] = {
      {Precision::FP32, &fp32}, {Precision::TF32, &tf32}, {Precision::BF16, &bf16}};
  unsigned seed = 100;
  for (const ConvCase& c : kConvCases) {
    INFO("case: " << c.name << ", x " << c.xs().nhwc() << ", y " << c.ys().nhwc());
    ConvInputs in;
    in.x = random_values(c.xs().numel(), ++seed);
    in.kernel = random_values(c.kernel_numel(), ++seed);
    in.bias = random_values(size_t(c.cout), ++seed);
    in.dy = random_values(c.ys().numel(), ++seed);
    const ConvResults ref = run_conv_case(Device{}, c, in);
    in.y_act = ref.y;
    for (const auto& [prec, g] : devices) {
      INFO("precision " << precision_name(prec));
      const ConvResults got = run_conv_case(g->device, c, in);
      const double tol = conv_tolerance(run_precision(prec, c));
      check_conv(c, got, ref, ConvTolerances{tol, tol, tol});
    }
  }
}

// The layers of a bf16 U-Net: bf16 in and out in the middle, fp32 x in the
// first convolution (the Rescaling's output), fp32 y out of the last (the
// logits). Every case of kConvCases: explicitly padded ones (2x2 same, 3x3
// same stride 2) and ones with fewer than 8 filters (tf32 on bf16 input).
TEST_CASE("GPU Conv2D and Conv2DTranspose on bf16 activations match the CPU on bf16-rounded inputs",
          "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice bf16(0, Precision::BF16);
  const ConvTypes types[] = {{DType::BF16, DType::BF16}, {DType::F32, DType::BF16}, {DType::BF16, DType::F32}};
  unsigned seed = 500;
  for (const ConvCase& c : kConvCases) {
    const Precision prec = run_precision(Precision::BF16, c);
    INFO("case: " << c.name << ", x " << c.xs().nhwc() << ", y " << c.ys().nhwc() << ", runs in "
                  << precision_name(prec));
    // x, the kernel and dy as the GPU's bf16 tensors (or bf16 convolution)
    // hold them, so the CPU computes on the GPU's inputs; bias stays fp32.
    ConvInputs in;
    in.x = round_bf16(random_values(c.xs().numel(), ++seed));
    in.kernel = round_bf16(random_values(c.kernel_numel(), ++seed));
    in.bias = random_values(size_t(c.cout), ++seed);
    in.dy = round_bf16(random_values(c.ys().numel(), ++seed));
    const ConvResults ref = run_conv_case(Device{}, c, in);
    in.y_act = ref.y;  // uploaded rounded to bf16 where y is bf16 (rounding keeps the sign: ReLU' unchanged)
    for (const ConvTypes& t : types) {
      INFO("x " << dtype_name(t.x) << ", y " << dtype_name(t.y));
      const ConvResults got = run_conv_case(bf16.device, c, in, t);
      check_conv(c, got, ref,
                 ConvTolerances{conv_tolerance(prec, t.y), conv_tolerance(prec, t.x), conv_tolerance(prec)});
    }
  }
}

TEST_CASE("GPU MaxPool2D matches the CPU (valid and same, odd sizes)", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  unsigned seed = 200;
  for (const PoolCase& c : kPoolCases) {
    INFO("case: " << c.name);
    std::vector<float> x = random_values(c.xs().numel(), ++seed, -2.f, 2.f);
    const std::vector<float> dy = random_values(c.ys().numel(), ++seed);
    // Distinct values, then values in {-2, ..., 2}: windows with tied maxima,
    // whose gradient goes to the first (row-major) on both devices.
    for (bool ties : {false, true}) {
      INFO((ties ? "tied maxima" : "distinct values"));
      if (ties)
        for (float& v : x) v = std::round(v);
      const PoolResults ref = run_pool(Device{}, c, x, dy), got = run_pool(g.device, c, x, dy);
      CHECK_IDENTICAL("forward (inference)", got.y_infer, ref.y_infer);
      CHECK_IDENTICAL("forward (training)", got.y_train, ref.y_train);
      CHECK_CLOSE("backward dx", got.dx, ref.dx, kReorder);
    }
  }
}

TEST_CASE("GPU MaxPool2D on bf16 tensors matches the CPU on bf16-rounded inputs", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::BF16);
  unsigned seed = 600;
  for (const PoolCase& c : kPoolCases) {
    INFO("case: " << c.name);
    std::vector<float> x = round_bf16(random_values(c.xs().numel(), ++seed, -2.f, 2.f));
    const std::vector<float> dy = round_bf16(random_values(c.ys().numel(), ++seed));
    // Random values (a few windows tied after the rounding), then values in
    // {-2, ..., 2}: many tied maxima, whose gradient goes to the first
    // (row-major) on both devices.
    for (bool ties : {false, true}) {
      INFO((ties ? "tied maxima" : "random values"));
      if (ties)
        for (float& v : x) v = std::round(v);
      const PoolResults ref = run_pool(Device{}, c, x, dy), got = run_pool(g.device, c, x, dy, DType::BF16);
      // Pooling selects: the bf16 maxima are the CPU's exactly, and so is each
      // gradient that is one dy (or 0) where the windows do not overlap.
      CHECK_IDENTICAL("forward (inference)", got.y_infer, ref.y_infer);
      CHECK_IDENTICAL("forward (training)", got.y_train, ref.y_train);
      if (c.overlapping())
        CHECK_CLOSE("backward dx (float sums of bf16 dy, rounded to bf16)", got.dx, ref.dx, kBf16Rounding);
      else
        CHECK_IDENTICAL("backward dx", got.dx, ref.dx);
    }
  }
}

TEST_CASE("GPU convolution epilogue applies every activation as the CPU, with fp32 and bf16 outputs",
          "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  // A 3x3 'same' Conv2D 8 -> 8 with a bias; inputs rounded to bf16 so that
  // both devices convolve the same values.
  const Conv2DParams p = conv_params(3, 1, true);
  const Shape xs{2, 5, 4, 8}, ys{2, 5, 4, 8};
  const std::vector<float> xh = round_bf16(random_values(xs.numel(), 351, -2.f, 2.f));
  const std::vector<float> kh = round_bf16(random_values(size_t(3 * 3 * 8 * 8), 352, -0.3f, 0.3f));
  const std::vector<float> bh = random_values(8, 353), dyh = round_bf16(random_values(ys.numel(), 354));
  for (const std::string& name : activation_names()) {
    const Activation a = activation_from_name(name);
    if (activation_needs_input(a.kind)) continue;  // never fused: the layers apply them (kept_activation.h)
    for (const Precision prec : {Precision::FP32, Precision::BF16}) {
      const DType yt = prec == Precision::BF16 ? DType::BF16 : DType::F32;
      INFO("activation " << name << ", outputs " << dtype_name(yt));
      GpuDevice g(0, prec);
      // y_act: the output backward reads (empty: this device's forward). The
      // GPU reads the CPU's, so that a kink (relu, leaky_relu) cannot flip
      // where a bf16 forward moves an output near 0 across it (see ConvInputs).
      auto run = [&](const Device& d, DType t, const std::vector<float>& y_act) {
        Conv2DOp op(p);
        Tensor x = make_tensor(xs, xh, d, DType::F32), dy = make_tensor(ys, dyh, d, t);
        Tensor y = poisoned_tensor(ys, t, d), dx = poisoned_tensor(xs, DType::F32, d);
        Buffer<float> kernel = upload(kh, d), bias = upload(bh, d), dk(d, kh.size()), db(d, 8);
        op.forward(d, x.view(), ConvWeights{kernel.data(), bias.data()}, a, y.view());
        std::vector<std::vector<float>> r{download(y)};
        if (!y_act.empty()) y = make_tensor(ys, y_act, d, t);
        ConvBackwardArgs args;
        args.act = a;
        args.y = y.view();
        args.dy = dy.raw();
        args.x = x.view();
        args.kernel = kernel.data();
        args.dkernel = dk.data();
        args.dbias = db.data();
        args.dx = dx.raw();
        op.backward(d, args);
        for (const auto* b : {&dx.buffer(), &dk, &db}) r.push_back(download(*b));
        return r;
      };
      const auto ref = run(Device{}, DType::F32, {}), got = run(g.device, yt, ref[0]);
      // bf16 outputs: the output itself is rounded, and the gradient is taken
      // from the rounded output (about 2^-9 |dy|, elementwise_math.h).
      const double tol = yt == DType::BF16 ? conv_tolerance(Precision::BF16) : conv_tolerance(Precision::FP32);
      CHECK_CLOSE("forward", got[0], ref[0], tol);
      CHECK_CLOSE("backward dx", got[1], ref[1], tol);
      CHECK_CLOSE("backward dkernel", got[2], ref[2], tol);
      CHECK_CLOSE("backward dbias", got[3], ref[3], tol);
    }
  }
}

TEST_CASE("GPU activations match the CPU", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const size_t n = 10007;
  std::vector<float> x = random_values(n, 301, -8.f, 8.f);
  for (size_t i = 0; i < n; i += 97) x[i] = 0.f;  // relu's kink: y = 0, gradient 0
  const std::vector<float> dy = random_values(n, 302);
  std::vector<Activation> all;
  for (const std::string& name : activation_names()) all.push_back(activation_from_name(name));
  all.push_back(Activation{ActivationKind::Elu, 0.5f});
  all.push_back(Activation{ActivationKind::LeakyRelu, 0.01f});
  all.push_back(Activation{ActivationKind::ClippedRelu, 0.1f, 2.5f});  // ReLU(max_value=2.5, negative_slope=0.1)
  for (const Activation a : all) {
    INFO("activation " << activation_name(a) << ", alpha " << a.alpha);
    auto run = [&](const Device& d) {
      Buffer<float> y = upload(x, d), in = upload(x, d), g_ = upload(dy, d), dx(d, n);
      activation_forward(d, a, y.data(), n);
      std::vector<float> yh = download(y);
      const float* v = activation_needs_input(a.kind) ? in.data() : y.data();  // what the gradient is written in
      activation_backward(d, a, v, g_.data(), dx.data(), n);  // out of place
      activation_backward(d, a, v, g_.data(), g_.data(), n);  // in place
      CHECK(download(dx) == download(g_));
      return std::make_pair(yh, download(g_));
    };
    const auto ref = run(Device{}), got = run(g.device);
    const bool exact = a.is(ActivationKind::Linear) || a.is(ActivationKind::Relu) ||
                       a.is(ActivationKind::LeakyRelu) || a.is(ActivationKind::ClippedRelu);
    if (!exact) {  // expf, tanhf, log1pf, expm1f, erfcf differ in the last bits between the host and the GPU
      CHECK_CLOSE("forward", got.first, ref.first, kTranscendental);
      CHECK_CLOSE("backward", got.second, ref.second, kTranscendental);
    } else {
      CHECK_IDENTICAL("forward", got.first, ref.first);
      CHECK_IDENTICAL("backward", got.second, ref.second);
    }
  }
}

TEST_CASE("GPU Rescaling (scale_shift, scale_backward) matches the CPU, in place too", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const size_t n = 4099;
  const std::vector<float> x = random_values(n, 311, 0.f, 255.f), dy = random_values(n, 312);
  const float scale = 1.f / 255.f, offset = -0.5f;
  auto run = [&](const Device& d) {
    Buffer<float> xb = upload(x, d), y(d, n), inplace = upload(x, d), dyb = upload(dy, d), dx(d, n);
    scale_shift_forward(d, xb.data(), scale, offset, y.data(), n);
    scale_shift_forward(d, inplace.data(), scale, offset, inplace.data(), n);
    scale_backward(d, dyb.data(), scale, dx.data(), n);
    std::vector<float> dx_h = download(dx);
    scale_backward(d, dyb.data(), scale, dyb.data(), n);
    return std::vector<std::vector<float>>{download(y), download(inplace), dx_h, download(dyb)};
  };
  const auto ref = run(Device{}), got = run(g.device);
  CHECK_CLOSE("scale_shift_forward", got[0], ref[0], kArith);
  CHECK_CLOSE("scale_shift_forward in place", got[1], ref[0], kArith);
  CHECK_IDENTICAL("scale_backward", got[2], ref[2]);
  CHECK_IDENTICAL("scale_backward in place", got[3], ref[2]);
}

TEST_CASE("GPU add (2 and 3 inputs) and accumulate match the CPU exactly", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const size_t n = 3001;
  const std::vector<float> a = random_values(n, 321), b = random_values(n, 322, -1e3f, 1e3f),
                           c = random_values(n, 323, -1e-3f, 1e-3f);
  auto run = [&](const Device& d) {
    Buffer<float> ab = upload(a, d), bb = upload(b, d), cb = upload(c, d), y2(d, n), y3(d, n);
    const float* two[] = {ab.data(), bb.data()};
    const float* three[] = {ab.data(), bb.data(), cb.data()};
    add_forward(d, two, 2, y2.data(), n);
    add_forward(d, three, 3, y3.data(), n);
    accumulate(d, DType::F32, ab.data(), cb.data(), n);
    return std::vector<std::vector<float>>{download(y2), download(y3), download(ab)};
  };
  const auto ref = run(Device{}), got = run(g.device);
  // Sums in input order: ((a + b) + c) rounds the same on both devices.
  CHECK_IDENTICAL("add, k = 2", got[0], ref[0]);
  CHECK_IDENTICAL("add, k = 3", got[1], ref[1]);
  CHECK_IDENTICAL("accumulate", got[2], ref[2]);
}

TEST_CASE("GPU accumulate on bf16 rounds the float sum to nearest even (vector and scalar paths)",
          "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::BF16);
  const size_t n = 3001;  // not a multiple of 4: the vector path's scalar tail runs too
  std::vector<float> a = round_bf16(random_values(n, 621)), b = round_bf16(random_values(n, 622, -1e-2f, 1e-2f));
  // Sums halfway between two bf16 values, which go to the even one:
  // 1 + 2^-8 -> 1 (rounding half away would give 1 + 2^-7) and
  // (1 + 2^-7) + 2^-8 -> 1 + 2^-6 (truncation would give 1 + 2^-7), either
  // sign (added as pairs where the offsets are equal).
  for (size_t i = 0; i < n; i += 10) {
    const float sign = i % 20 ? -1.f : 1.f;
    a[i] = sign * (i % 30 ? 1.f : 1.f + 1.f / 128);
    b[i] = sign / 256;
  }
  const Shape s{1, 1, int(n), 1};
  // y + oy += x + ox over n - max(oy, ox) elements: offsets of one element
  // (2 bytes) leave the 16-byte alignment of the vector path.
  const std::pair<size_t, size_t> offsets[] = {{0, 0}, {1, 1}, {0, 1}};
  for (const auto& [oy, ox] : offsets) {
    const size_t m = n - std::max(oy, ox);
    INFO("y offset " << oy << ", x offset " << ox << " elements");
    std::vector<float> want = a;  // elements outside the range keep a
    size_t rounded = 0;
    for (size_t i = 0; i < m; ++i) {
      const float sum = a[oy + i] + b[ox + i];  // exact or rounded in float, as the GPU's
      want[oy + i] = round_bf16(sum);
      rounded += want[oy + i] != sum;
    }
    REQUIRE(rounded > m / 2);  // the bf16 rounding matters for most sums
    Tensor y = make_bf16_tensor(s, a, g.device), x = make_bf16_tensor(s, b, g.device);
    accumulate(g.device, DType::BF16, static_cast<char*>(y.raw()) + 2 * oy,
               static_cast<const char*>(x.raw()) + 2 * ox, m);
    CHECK_IDENTICAL("accumulate", download(y), want);
  }
}

TEST_CASE("GPU channel concatenation matches the CPU (3 inputs, a skipped gradient)", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const long long P = 2 * 5 * 3;
  const int cs[] = {3, 1, 5};
  const int cy = 9;
  std::vector<std::vector<float>> xh;
  for (int i = 0; i < 3; ++i) xh.push_back(random_values(size_t(P) * size_t(cs[i]), 331u + unsigned(i)));
  const std::vector<float> dyh = random_values(size_t(P) * cy, 335);
  auto run = [&](const Device& d) {
    Buffer<float> x0 = upload(xh[0], d), x1 = upload(xh[1], d), x2 = upload(xh[2], d);
    Buffer<float> y(d, size_t(P) * cy), dy = upload(dyh, d);
    Buffer<float> dx0(d, xh[0].size()), dx2(d, xh[2].size());
    const void* xs[] = {x0.data(), x1.data(), x2.data()};
    concat_channels_forward(d, DType::F32, xs, cs, 3, P, y.data(), cy);
    void* dxs[] = {dx0.data(), nullptr, dx2.data()};
    concat_channels_backward(d, DType::F32, dy.data(), cy, P, cs, 3, dxs);
    return std::vector<std::vector<float>>{download(y), download(dx0), download(dx2)};
  };
  const auto ref = run(Device{}), got = run(g.device);
  CHECK_IDENTICAL("forward", got[0], ref[0]);
  CHECK_IDENTICAL("backward, input 0", got[1], ref[1]);
  CHECK_IDENTICAL("backward, input 2", got[2], ref[2]);
}

/// A concatenation of bf16 tensors: the channel counts and the input whose
/// gradient is skipped (nullptr).
struct ConcatCase {
  const char* name;
  std::vector<int> cs;
  size_t skipped;
};

TEST_CASE("GPU channel concatenation of bf16 tensors matches the CPU exactly", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::BF16);
  const ConcatCase cases[] = {
      {"even counts and offsets (4-byte pairs; float4 for the 8 at offset 0 of 16)", {8, 2, 6}, 1},
      {"odd counts (2-byte copies)", {3, 1, 5}, 1},
      {"even counts at odd offsets (2-byte copies), an even total", {1, 2, 4, 3}, 3},
  };
  const long long P = 3 * 5 * 3;  // odd: an odd count's tensor ends in half a word
  unsigned seed = 640;
  for (const ConcatCase& c : cases) {
    INFO("case: " << c.name);
    const size_t k = c.cs.size();
    int cy = 0;
    std::vector<std::vector<float>> xh;
    for (int ci : c.cs) {
      cy += ci;
      xh.push_back(round_bf16(random_values(size_t(P) * size_t(ci), ++seed)));
    }
    const std::vector<float> dyh = round_bf16(random_values(size_t(P) * size_t(cy), ++seed));
    auto run = [&](const Device& d, DType t) {
      std::vector<Tensor> x, dx;
      std::vector<const void*> xs;
      std::vector<void*> dxs;
      for (size_t i = 0; i < k; ++i) {
        const Shape s{int(P), 1, 1, c.cs[i]};
        x.push_back(make_tensor(s, xh[i], d, t));
        dx.push_back(poisoned_tensor(s, t, d));
        xs.push_back(x.back().raw());  // device memory: stays put when the vector moves the Tensor
        dxs.push_back(i == c.skipped ? nullptr : dx.back().raw());
      }
      Tensor y = poisoned_tensor(Shape{int(P), 1, 1, cy}, t, d), dy = make_tensor(y.shape(), dyh, d, t);
      concat_channels_forward(d, t, xs.data(), c.cs.data(), k, P, y.raw(), cy);
      concat_channels_backward(d, t, dy.raw(), cy, P, c.cs.data(), k, dxs.data());
      std::vector<std::vector<float>> r{download(y)};  // then dx of every input, empty where skipped
      for (size_t i = 0; i < k; ++i) r.push_back(i == c.skipped ? std::vector<float>{} : download(dx[i]));
      return r;
    };
    const auto ref = run(Device{}, DType::F32), got = run(g.device, DType::BF16);
    CHECK_IDENTICAL("forward", got[0], ref[0]);
    for (size_t i = 0; i < k; ++i)
      if (i != c.skipped) CHECK_IDENTICAL("backward, input " + std::to_string(i), got[1 + i], ref[1 + i]);
  }
}

TEST_CASE("GPU Cropping2D (fp32 and bf16, asymmetric) matches the CPU exactly", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  const Shape xs{3, 7, 6, 5};  // odd channel count: bf16 rows of odd byte length / 4
  const Crop2DParams p{1, 2, 2, 1};  // a left crop: the rows' byte offset
  const Shape ys{xs.n, xs.h - p.top - p.bottom, xs.w - p.left - p.right, xs.c};
  const std::vector<float> xh = round_bf16(random_values(xs.numel(), 345));
  const std::vector<float> dyh = round_bf16(random_values(ys.numel(), 346));
  for (const DType t : {DType::F32, DType::BF16}) {
    INFO("type " << dtype_name(t));
    GpuDevice g(0, t == DType::BF16 ? Precision::BF16 : Precision::FP32);
    auto run = [&](const Device& d, DType tt) {
      Tensor x = make_tensor(xs, xh, d, tt), dy = make_tensor(ys, dyh, d, tt);
      Tensor y = poisoned_tensor(ys, tt, d), dx = poisoned_tensor(xs, tt, d);
      crop_forward(d, tt, x.raw(), xs, p, y.raw());
      crop_backward(d, tt, dy.raw(), xs, p, dx.raw());
      return std::make_pair(download(y), download(dx));
    };
    const auto ref = run(Device{}, DType::F32), got = run(g.device, t);
    CHECK_IDENTICAL("forward", got.first, ref.first);
    CHECK_IDENTICAL("backward", got.second, ref.second);
  }
}

TEST_CASE("GPU nearest upsampling matches the CPU", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const Shape xs{2, 3, 4, 5};
  const UpSample2DParams p{2, 3};
  const Shape ys{xs.n, xs.h * p.sh, xs.w * p.sw, xs.c};
  const std::vector<float> xh = random_values(xs.numel(), 341), dyh = random_values(ys.numel(), 342);
  auto run = [&](const Device& d) {
    Buffer<float> x = upload(xh, d), y(d, ys.numel()), dy = upload(dyh, d), dx(d, xs.numel());
    upsample_nearest_forward(d, x.data(), xs, p, y.data());
    upsample_nearest_backward(d, dy.data(), xs, p, dx.data());
    return std::make_pair(download(y), download(dx));
  };
  const auto ref = run(Device{}), got = run(g.device);
  CHECK_IDENTICAL("forward", got.first, ref.first);
  CHECK_CLOSE("backward (block sums)", got.second, ref.second, kReorder);
}

TEST_CASE("GPU dropout draws exactly the CPU's mask and values (per element and per channel)", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const bool per_channel = GENERATE(false, true);  // Dropout, SpatialDropout2D
  INFO("per_channel " << per_channel);
  const Shape s = per_channel ? Shape{4, 5, 7, 24} : Shape{3, 5, 7, 4};
  const size_t n = s.numel();
  const double rate = 0.3;
  const DropoutParams p{uint32_t(rate * double(1u << 24)), float(1.0 / (1.0 - rate)), per_channel};
  const uint64_t step_key = dropout_step_key(11, 22, 33);
  const long long sample_offset = 5;
  const std::vector<float> xh = random_values(n, 351), dyh = random_values(n, 352);
  auto run = [&](const Device& d) {
    Buffer<float> x = upload(xh, d), y(d, n), dy = upload(dyh, d), dx(d, n);
    Buffer<uint8_t> mask(d, n);
    dropout_forward(d, x.data(), s, step_key, sample_offset, p, y.data(), mask.data());
    dropout_backward(d, dy.data(), mask.data(), p.scale, dx.data(), n);
    return std::make_tuple(download(y), download(mask), download(dx));
  };
  const auto ref = run(Device{}), got = run(g.device);
  const std::vector<uint8_t>& mask = std::get<1>(ref);
  size_t kept = 0;
  for (uint8_t m : mask) kept += m;
  REQUIRE(kept > n / 2);  // about 70% kept: the test sees both kinds of element
  REQUIRE(kept < n);
  CHECK_IDENTICAL("mask", std::get<1>(got), mask);
  CHECK_IDENTICAL("forward y", std::get<0>(got), std::get<0>(ref));
  CHECK_IDENTICAL("backward dx", std::get<2>(got), std::get<2>(ref));
}

TEST_CASE("GPU BatchNormalization matches the CPU in every step", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const Shape s{2, 6, 5, 7};
  const int C = s.c;
  const double count = double(s.n) * s.h * s.w, epsilon = 1e-3, momentum = 0.99;
  const size_t Cu = size_t(C);
  // Inputs of every step, made here (not taken from an earlier step) so that
  // each step is compared on identical inputs.
  const std::vector<float> x = random_values(s.numel(), 361, -1.f, 3.f), dy = random_values(s.numel(), 362);
  const std::vector<float> gamma = random_values(Cu, 363, 0.5f, 1.5f), beta = random_values(Cu, 364);
  const std::vector<float> moving_mean = random_values(Cu, 365), moving_var = random_values(Cu, 366, 0.5f, 1.5f);
  const std::vector<float> mean = random_values(Cu, 367), istd = random_values(Cu, 368, 0.5f, 2.f);
  const std::vector<float> a = random_values(Cu, 369), b = random_values(Cu, 370);
  const std::vector<float> k1 = random_values(Cu, 371), k2 = random_values(Cu, 372), k3 = random_values(Cu, 373);
  std::vector<double> sums(2 * Cu);
  {
    const std::vector<float> m = random_values(Cu, 374), v = random_values(Cu, 375, 0.5f, 1.5f);
    for (size_t c = 0; c < Cu; ++c) {
      sums[c] = count * m[c];
      sums[Cu + c] = count * (double(m[c]) * m[c] + v[c]);
    }
    sums[Cu] = count * double(m[0]) * m[0];  // channel 0: variance 0 (epsilon alone)
  }

  struct Results {
    std::vector<double> stat_sums, grad_sums;
    std::vector<std::vector<float>> train, train_no_affine, infer, apply, params, backward, backward_inference,
        dx;
  };
  auto run = [&](const Device& d) {
    Results r;
    BatchNormOp op;
    Buffer<float> xb = upload(x, d), dyb = upload(dy, d), gb = upload(gamma, d), bb = upload(beta, d);
    Buffer<float> meanb = upload(mean, d), istdb = upload(istd, d), ab = upload(a, d), bbias = upload(b, d);
    Buffer<float> k1b = upload(k1, d), k2b = upload(k2, d), k3b = upload(k3, d);
    Buffer<double> sumsb = upload(sums, d), out_sums(d, 2 * Cu);
    Buffer<float> o1(d, Cu), o2(d, Cu), o3(d, Cu), o4(d, Cu), y(d, s.numel());
    auto outs = [&](std::vector<Buffer<float>*> bufs) {
      std::vector<std::vector<float>> v;
      for (Buffer<float>* p : bufs) v.push_back(download(*p));
      return v;
    };

    BatchNormBackend& bn = op.on(d);
    bn.stat_sums(xb.data(), s, out_sums.data());
    r.stat_sums = download(out_sums);

    for (bool affine : {true, false}) {
      Buffer<float> mm = upload(moving_mean, d), mv = upload(moving_var, d);
      BatchNormChannels v;
      v.C = C;
      v.gamma = affine ? gb.data() : nullptr, v.beta = affine ? bb.data() : nullptr;
      v.moving_mean = mm.data(), v.moving_var = mv.data();
      v.mean = o1.data(), v.istd = o2.data(), v.a = o3.data(), v.b = o4.data();
      bn.train_coefficients(sumsb.data(), count, BatchNormSettings{epsilon, momentum}, v);
      (affine ? r.train : r.train_no_affine) = outs({&mm, &mv, &o1, &o2, &o3, &o4});
    }
    {
      Buffer<float> mm = upload(moving_mean, d), mv = upload(moving_var, d);
      BatchNormChannels v;
      v.C = C;
      v.gamma = gb.data(), v.beta = bb.data(), v.moving_mean = mm.data(), v.moving_var = mv.data();
      v.mean = o1.data(), v.istd = o2.data(), v.a = o3.data(), v.b = o4.data();
      bn.inference_coefficients(epsilon, v);
      r.infer = outs({&o1, &o2, &o3, &o4});
    }
    bn.apply(xb.data(), s, ab.data(), bbias.data(), y.data());
    r.apply = outs({&y});

    BatchNormChannels stats;  // the inputs of the backward steps
    stats.C = C;
    stats.gamma = gb.data(), stats.mean = meanb.data(), stats.istd = istdb.data();
    bn.grad_sums(xb.data(), dyb.data(), s, stats, out_sums.data());
    r.grad_sums = download(out_sums);

    bn.param_grads(sumsb.data(), C, o1.data(), o2.data());
    r.params = outs({&o1, &o2});
    o3.zero();
    bn.param_grads(sumsb.data(), C, nullptr, o3.data());
    r.params.push_back(download(o3));

    BatchNormChannels k = stats;
    k.k1 = o1.data(), k.k2 = o2.data(), k.k3 = o3.data();
    bn.backward_coefficients(sumsb.data(), count, true, k);
    r.backward = outs({&o1, &o2, &o3});
    bn.backward_coefficients(sumsb.data(), count, false, k);
    r.backward_inference = outs({&o1, &o2, &o3});

    BatchNormChannels given = stats;
    given.k1 = k1b.data(), given.k2 = k2b.data(), given.k3 = k3b.data();
    bn.backward_data(xb.data(), dyb.data(), s, given, y.data());
    r.dx = outs({&y});
    return r;
  };
  const Results ref = run(Device{}), got = run(g.device);
  auto check_all = [](const char* step, const std::vector<std::vector<float>>& gv,
                      const std::vector<std::vector<float>>& rv) {
    REQUIRE(gv.size() == rv.size());
    for (size_t i = 0; i < rv.size(); ++i) CHECK_CLOSE(std::string(step) + " output " + std::to_string(i), gv[i], rv[i], kArith);
  };
  CHECK_CLOSE("stat_sums", got.stat_sums, ref.stat_sums, kDoubleSum);
  check_all("train_coefficients (moving_mean, moving_var, mean, istd, a, b)", got.train, ref.train);
  check_all("train_coefficients without gamma/beta", got.train_no_affine, ref.train_no_affine);
  check_all("inference_coefficients (mean, istd, a, b)", got.infer, ref.infer);
  check_all("apply", got.apply, ref.apply);
  CHECK_CLOSE("grad_sums", got.grad_sums, ref.grad_sums, kReorder);
  check_all("param_grads (dgamma, dbeta, dbeta alone)", got.params, ref.params);
  check_all("backward_coefficients (k1, k2, k3) with batch statistics", got.backward, ref.backward);
  check_all("backward_coefficients (k1, k2, k3) after an inference forward", got.backward_inference,
            ref.backward_inference);
  check_all("backward_data", got.dx, ref.dx);
}

TEST_CASE("GPU segmentation loss sums and gradient match the CPU", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const int n = 3;
  const size_t m = 16 * 16, total = size_t(n) * m;
  const std::vector<float> z = random_values(total, 381, -6.f, 6.f);
  std::vector<float> y = random_values(total, 382, 0.f, 1.f);
  for (size_t i = 0; i < total; ++i)
    if (i % 5) y[i] = y[i] > 0.6f ? 1.f : 0.f;  // mostly binary masks, some soft targets
  const std::vector<float> coef = random_values(size_t(n) * 3, 383);
  for (const std::pair<bool, bool>& need : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
    const bool bce = need.first, dice = need.second;
    INFO("need_bce " << bce << ", need_dice " << dice);
    auto run = [&](const Device& d) {
      Buffer<float> zb = upload(z, d), yb = upload(y, d);
      std::vector<double> sums(size_t(n) * 4, -1.0);
      segmentation_sums(d, zb.data(), yb.data(), n, m, bce, dice, sums.data());
      return sums;
    };
    CHECK_CLOSE("segmentation_sums", run(g.device), run(Device{}), kReorder);
  }
  auto grad = [&](const Device& d) {
    Buffer<float> zb = upload(z, d), yb = upload(y, d), gb(d, total);
    segmentation_loss_grad(d, zb.data(), yb.data(), n, m, coef.data(), gb.data());
    return download(gb);
  };
  CHECK_CLOSE("segmentation_loss_grad", grad(g.device), grad(Device{}), kTranscendental);
}

TEST_CASE("GPU logit histogram counts exactly what the CPU counts", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  float thr[kLogitThresholds];
  for (int t = 0; t < kLogitThresholds; ++t) {
    const double p = 0.5 + 0.05 * t;
    thr[t] = float(std::log(p / (1 - p)));
  }
  const size_t n = 50021;
  std::vector<float> z = random_values(n, 391, -4.f, 4.f), y = random_values(n, 392, 0.f, 1.f);
  for (size_t i = 0; i < n; i += 7) z[i] = thr[i % kLogitThresholds];  // on a threshold: not above it
  for (size_t i = 0; i < n; i += 11) y[i] = 0.5f;                        // not foreground (y > 0.5 is)
  auto run = [&](const Device& d) {
    Buffer<float> zb = upload(z, d), yb = upload(y, d);
    std::vector<int64_t> hist(2 * (kLogitThresholds + 1));
    for (size_t i = 0; i < hist.size(); ++i) hist[i] = int64_t(i) * 1000;  // added to, not overwritten
    logit_histogram(d, zb.data(), yb.data(), n, thr, hist.data());
    return hist;
  };
  const std::vector<int64_t> ref = run(Device{}), got = run(g.device);
  int64_t added = 0;
  for (size_t i = 0; i < ref.size(); ++i) added += ref[i] - int64_t(i) * 1000;
  REQUIRE(added == int64_t(n));
  CHECK_IDENTICAL("histogram", got, ref);
}

TEST_CASE("GPU AUC histogram counts what the CPU counts, but for values on a bucket's edge", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const int bins = MetricCounts::kAucThresholds;
  const size_t n = 50021;
  std::vector<float> z = random_values(n, 393, -6.f, 6.f), y = random_values(n, 394, 0.f, 1.f);
  for (size_t i = 0; i < n; i += 13) z[i] = -40.f;  // probability 0: bucket 0
  auto run = [&](const Device& d) {
    Buffer<float> zb = upload(z, d), yb = upload(y, d);
    std::vector<int64_t> hist(size_t(2 * bins), 5);  // added to, not overwritten
    probability_histogram(d, zb.data(), yb.data(), n, bins, hist.data());
    return hist;
  };
  const std::vector<int64_t> ref = run(Device{}), got = run(g.device);
  // The GPU's expf may differ from the CPU's by an ulp, moving a value that lies on a bucket's edge
  // to the next bucket; each class's total is the same.
  int64_t moved = 0;
  for (int fg = 0; fg < 2; ++fg) {
    int64_t ref_total = 0, got_total = 0;
    for (int b = 0; b < bins; ++b) {
      const size_t k = size_t(fg * bins + b);
      ref_total += ref[k];
      got_total += got[k];
      moved += std::abs(ref[k] - got[k]);
    }
    CHECK(got_total == ref_total);
  }
  CHECK(moved <= 10);
  CHECK(ref[0] + ref[size_t(bins)] >= int64_t(n / 13) + 10);  // each class's bucket 0 started at 5
}

/// Adam's bias-corrected rate at step t (learning rate 1e-3, beta_1 0.9, beta_2 0.999).
static float lr_t(int t) { return float(1e-3 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t))); }

TEST_CASE("GPU optimizer steps match the CPU", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const size_t n = 2053;
  const int steps = 3;
  const std::vector<float> w0 = random_values(n, 401), s1 = random_values(n, 402, 0.f, 0.1f),
                           s2 = random_values(n, 403, 0.f, 0.1f), s3(n, 0.f);
  std::vector<std::vector<float>> grads;
  for (int t = 0; t < steps; ++t) grads.push_back(random_values(n, 410u + unsigned(t)));

  // Runs `steps` updates of w with slots a (s1), b (s2) and c (s3, zeros:
  // amsgrad's v_hat and centered RMSprop's mg start there) on d (a and b
  // start non-negative, as RMSprop's rms must); returns w, a, b, c. A step
  // gets the arrays with w, g and n set and places the slots it uses.
  struct Slots {
    float *a, *b, *c;
  };
  using Step = void (*)(const Device&, OptimizerArrays, Slots, int);
  auto run = [&](const Device& d, Step step) {
    Buffer<float> w = upload(w0, d), a = upload(s1, d), b = upload(s2, d), c = upload(s3, d);
    for (int t = 0; t < steps; ++t) {
      Buffer<float> gb = upload(grads[size_t(t)], d);
      OptimizerArrays arrays;
      arrays.w = w.data(), arrays.g = gb.data(), arrays.n = n;
      step(d, arrays, Slots{a.data(), b.data(), c.data()}, t + 1);
    }
    return std::vector<std::vector<float>>{download(w), download(a), download(b), download(c)};
  };
  const std::pair<const char*, Step> optimizers[] = {
      {"sgd", [](const Device& d, OptimizerArrays x, Slots, int) { sgd_step(d, x, SgdParams{0.1f, 0.f, false}); }},
      {"sgd momentum",
       [](const Device& d, OptimizerArrays x, Slots s, int) {
         x.momentum = s.a;
         sgd_step(d, x, SgdParams{0.1f, 0.9f, false});
       }},
      {"sgd nesterov",
       [](const Device& d, OptimizerArrays x, Slots s, int) {
         x.momentum = s.a;
         sgd_step(d, x, SgdParams{0.1f, 0.9f, true});
       }},
      {"adam",
       [](const Device& d, OptimizerArrays x, Slots s, int t) {
         x.m = s.a, x.v = s.b;
         adam_step(d, x, AdamParams{lr_t(t), 0.9f, 0.999f, 1e-7f});
       }},
      {"adam amsgrad",
       [](const Device& d, OptimizerArrays x, Slots s, int t) {
         x.m = s.a, x.v = s.b, x.v_hat = s.c;
         adam_step(d, x, AdamParams{lr_t(t), 0.9f, 0.999f, 1e-7f});
       }},
      {"rmsprop",
       [](const Device& d, OptimizerArrays x, Slots s, int) {
         x.rms = s.a;
         rmsprop_step(d, x, RmspropParams{1e-3f, 0.9f, 0.f, 1e-7f});
       }},
      {"rmsprop centered",
       [](const Device& d, OptimizerArrays x, Slots s, int) {
         x.rms = s.a, x.mg = s.c;
         rmsprop_step(d, x, RmspropParams{1e-3f, 0.9f, 0.f, 1e-7f});
       }},
      {"rmsprop momentum",
       [](const Device& d, OptimizerArrays x, Slots s, int) {
         x.rms = s.a, x.momentum = s.b;
         rmsprop_step(d, x, RmspropParams{1e-3f, 0.9f, 0.5f, 1e-7f});
       }},
      {"rmsprop centered momentum",
       [](const Device& d, OptimizerArrays x, Slots s, int) {
         x.rms = s.a, x.momentum = s.b, x.mg = s.c;
         rmsprop_step(d, x, RmspropParams{1e-3f, 0.9f, 0.5f, 1e-7f});
       }},
  };
  for (const auto& [name, step] : optimizers) {
    INFO("optimizer " << name);
    const auto ref = run(Device{}, step), got = run(g.device, step);
    REQUIRE(compare(ref[0], w0).max_abs_error > 1e-4);  // the steps moved the weights
    CHECK_CLOSE("weights", got[0], ref[0], kArith);
    CHECK_CLOSE("slot 1", got[1], ref[1], kArith);
    CHECK_CLOSE("slot 2", got[2], ref[2], kArith);
    CHECK_CLOSE("slot 3", got[3], ref[3], kArith);
  }
}

TEST_CASE("GPU regularizer sums and gradient term match the CPU", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  // One range up to the most ranges (over 2^21 weights), float4 tails, an
  // empty weight, and (offset by one float) unaligned pointers.
  const std::vector<size_t> sizes = {1, 7, 0, 2053, 300001, 3000007};
  size_t total = 1;
  for (size_t n : sizes) total += n;
  std::vector<float> w = random_values(total, 501);
  w[1] = 0.f;  // sign(0) = 0
  const std::vector<float> g0 = random_values(total, 502);
  Buffer<float> wd = upload(w, g.device);
  for (size_t shift : {size_t(0), size_t(1)}) {
    INFO("pointers offset by " << shift << " float(s)");
    std::vector<const float*> host_ws, dev_ws;
    size_t at = shift;
    for (size_t n : sizes) {
      host_ws.push_back(w.data() + at), dev_ws.push_back(wd.data() + at);
      at += n;
    }
    std::vector<double> ref(2 * sizes.size()), got(ref.size()), again(ref.size());
    abs_and_square_sums(Device{}, host_ws.data(), sizes.data(), sizes.size(), ref.data());
    abs_and_square_sums(g.device, dev_ws.data(), sizes.data(), sizes.size(), got.data());
    abs_and_square_sums(g.device, dev_ws.data(), sizes.data(), sizes.size(), again.data());
    for (size_t j = 0; j < ref.size(); ++j) {
      INFO("weight " << j / 2 << (j % 2 ? " sum w^2" : " sum |w|"));
      CHECK(got[j] == Approx(ref[j]).epsilon(1e-12).margin(1e-300));
    }
    CHECK(again == got);  // a fixed partition: the same bits every call
    REQUIRE(ref[8] > 1e3);

    const size_t n = total - 1;
    std::vector<float> gr(g0.begin() + long(shift), g0.begin() + long(shift + n));
    regularizer_grad(Device{}, w.data() + shift, gr.data(), n, 0.01f, 0.3f);
    Buffer<float> gd = upload(g0, g.device);
    regularizer_grad(g.device, wd.data() + shift, gd.data() + shift, n, 0.01f, 0.3f);
    const std::vector<float> all = download(gd);
    CHECK_CLOSE("gradient", std::vector<float>(all.begin() + long(shift), all.begin() + long(shift + n)), gr, kArith);
  }
}

/// Spans of floats as the clipping ops take them: one start per size in `sizes`, laid end to end from base.
std::vector<float*> spans_at(float* base, const std::vector<size_t>& sizes) {
  std::vector<float*> out;
  for (size_t n : sizes) out.push_back(base), base += n;
  return out;
}

TEST_CASE("GPU clip_by_norm matches the CPU and only queues work (nothing read back)", "[gpu][gpu_ops][clipping]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  // Norms above and below the limit, an empty span, float4 tails, most ranges of the square sums.
  const std::vector<size_t> sizes = {1, 7, 0, 2053, 300001};
  size_t total = 0;
  for (size_t n : sizes) total += n;
  std::vector<float> g0 = random_values(total, 701, -0.01f, 0.01f);
  for (size_t i = 2053 / 2; i < total; i += 97) g0[i] = 3.f;  // large norms for the last two spans
  for (const bool global : {false, true}) {
    INFO((global ? "global_clipnorm" : "clipnorm"));
    const std::vector<size_t> ns = global ? std::vector<size_t>{total} : sizes;
    std::vector<float> ref = g0;
    const std::vector<float*> host = spans_at(ref.data(), ns);
    clip_by_norm(Device{}, host.data(), ns.data(), ns.size(), 1.0, global);
    REQUIRE(ref != g0);  // something was clipped
    Buffer<float> gd = upload(g0, g.device);
    const std::vector<float*> dev = spans_at(gd.data(), ns);
    clip_by_norm(g.device, dev.data(), ns.data(), ns.size(), 1.0, global);
    CHECK_CLOSE("clipped gradients", download(gd), ref, kArith);
  }
#if defined(TRAINER_WITH_CUDA)
  // The compute stream held by a host function until the call returns (or a 3 s watchdog): a call that
  // waited for the stream (a read-back) would return only after the watchdog opened it.
  std::atomic<bool> open{false}, returned{false};
  auto hold = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  Buffer<float> gd = upload(g0, g.device);
  const std::vector<float*> dev = spans_at(gd.data(), sizes);
  REQUIRE(cudaLaunchHostFunc(cuda::context(g.device).stream(), hold, &open) == cudaSuccess);
  std::thread watchdog([&] {
    for (int ms = 0; ms < 3000 && !returned; ++ms) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    open = true;
  });
  clip_by_norm(g.device, dev.data(), sizes.data(), sizes.size(), 1.0, false);
  const bool returned_while_held = !open.load();
  returned = true;
  watchdog.join();
  g.device.ctx->synchronize();
  CHECK(returned_while_held);
#endif
}

TEST_CASE("GPU Multiply and its gradients match the CPU (same shapes and a broadcast map)", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const long long P = 2 * 9 * 7;
  for (const int C : {1, 4, 5}) {
    for (const int cb : {C, 1}) {
      INFO("C " << C << ", cb " << cb);
      const std::vector<float> a = random_values(size_t(P) * size_t(C), 601), b = random_values(size_t(P) * size_t(cb), 602),
                               dy = random_values(size_t(P) * size_t(C), 603);
      auto run = [&](const Device& d) {
        Buffer<float> ad = upload(a, d), bd = upload(b, d), dyd = upload(dy, d), y(d, a.size()), da(d, a.size()),
                      db(d, b.size());
        multiply_forward(d, ad.data(), bd.data(), cb, P, C, y.data());
        multiply_backward(d, ad.data(), bd.data(), cb, P, C, dyd.data(), da.data(), db.data());
        return std::make_tuple(download(y), download(da), download(db));
      };
      const auto ref = run(Device{}), got = run(g.device);
      CHECK_IDENTICAL("y", std::get<0>(got), std::get<0>(ref));
      CHECK_IDENTICAL("da", std::get<1>(got), std::get<1>(ref));
      CHECK_CLOSE("db", std::get<2>(got), std::get<2>(ref), kArith);  // the channel sum may use FMA on the GPU
    }
  }
}

TEST_CASE("GPU AveragePooling2D matches the CPU bit for bit (valid and same, odd sizes)", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  struct Case {
    Pool2DParams p;
    Shape xs;
  };
  const Case cases[] = {{Pool2DParams{2, 2, 2, 2, false}, {2, 9, 7, 5}},
                        {Pool2DParams{2, 2, 2, 2, true}, {2, 9, 7, 5}},
                        {Pool2DParams{3, 3, 1, 1, true}, {2, 8, 6, 16}},
                        {Pool2DParams{3, 2, 2, 1, true}, {1, 7, 9, 3}},
                        {Pool2DParams{2, 2, 3, 3, true}, {1, 7, 8, 3}}};  // strides above the pool
  for (const Case& c : cases) {
    const Shape ys{c.xs.n, conv_output_length(c.xs.h, c.p.ph, c.p.stride_h, c.p.same_padding),
                   conv_output_length(c.xs.w, c.p.pw, c.p.stride_w, c.p.same_padding), c.xs.c};
    INFO("x " << c.xs.nhwc() << ", y " << ys.nhwc());
    const PadPair ph = conv_padding(c.xs.h, ys.h, c.p.ph, c.p.stride_h), pw = conv_padding(c.xs.w, ys.w, c.p.pw, c.p.stride_w);
    const std::vector<float> xh = random_values(c.xs.numel(), 701), dyh = random_values(ys.numel(), 702);
    auto run = [&](const Device& d) {
      Buffer<float> x = upload(xh, d), y(d, ys.numel()), dy = upload(dyh, d), dx(d, c.xs.numel());
      avg_pool_forward(d, x.data(), c.xs, c.p, ph, pw, y.data(), ys);
      avg_pool_backward(d, dy.data(), ys, c.p, ph, pw, dx.data(), c.xs);
      return std::make_pair(download(y), download(dx));
    };
    const auto ref = run(Device{}), got = run(g.device);
    CHECK_IDENTICAL("forward", got.first, ref.first);
    CHECK_IDENTICAL("backward", got.second, ref.second);
  }
}

TEST_CASE("GPU PReLU matches the CPU (every sharing of the slopes)", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  struct Case {
    Shape xs;
    PReLUShape a;
  };
  const Case cases[] = {{{3, 9, 7, 6}, {9, 7, 6}}, {{3, 9, 7, 6}, {1, 1, 6}}, {{3, 9, 7, 6}, {9, 7, 1}},
                        {{3, 9, 7, 6}, {1, 7, 1}}, {{3, 9, 7, 6}, {1, 1, 1}},
                        {{2, 40, 40, 8}, {40, 40, 8}},  // more slopes than blocks: the grid-stride loop
                        {{0, 9, 7, 6}, {1, 1, 6}}};     // no samples: zero gradients
  for (const Case& cs : cases) {
    const Shape xs = cs.xs;
    const PReLUShape a = cs.a;
    INFO("alpha [" << a.ah << ", " << a.aw << ", " << a.ac << "]");
    const size_t slopes = size_t(a.ah) * a.aw * a.ac;
    const std::vector<float> xh = random_values(xs.numel(), 801), ah = random_values(slopes, 802),
                             dyh = random_values(xs.numel(), 803);
    auto run = [&](const Device& d) {
      Buffer<float> x = upload(xh, d), alpha = upload(ah, d), dy = upload(dyh, d), y(d, xs.numel()), dx(d, xs.numel()),
                    dalpha = upload(std::vector<float>(slopes, 7.f), d);  // overwritten
      prelu_forward(d, x.data(), xs, alpha.data(), a, y.data());
      prelu_backward(d, x.data(), xs, alpha.data(), a, dy.data(), dx.data(), dalpha.data());
      return std::make_tuple(download(y), download(dx), download(dalpha));
    };
    const auto ref = run(Device{}), got = run(g.device);
    CHECK_IDENTICAL("y", std::get<0>(got), std::get<0>(ref));
    CHECK_IDENTICAL("dx", std::get<1>(got), std::get<1>(ref));
    CHECK_CLOSE("dalpha", std::get<2>(got), std::get<2>(ref), kReorder);  // double sums in another order
  }
}

TEST_CASE("GPU GroupNormalization matches the CPU: statistics, forward and backward", "[gpu][gpu_ops][group_norm]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const Shape s{3, 7, 5, 12};
  const std::vector<float> x = random_values(s.numel(), 381, -1.f, 4.f), dy = random_values(s.numel(), 382);
  const std::vector<float> gamma = random_values(12, 383, 0.5f, 1.5f), beta = random_values(12, 384);
  for (const int groups : {1, 3, 12}) {
    for (const bool affine : {true, false}) {
      INFO("groups " << groups << (affine ? ", gamma and beta" : ", neither"));
      const size_t rows = size_t(s.n) * size_t(groups);
      auto run = [&](const Device& d) {
        Buffer<float> xb = upload(x, d), dyb = upload(dy, d), gb = upload(gamma, d), bb = upload(beta, d);
        Buffer<double> sums(d, 2 * size_t(s.n) * size_t(s.c));
        Buffer<float> mean(d, rows), istd(d, rows), coef(d, 2 * rows), y(d, s.numel()), dx(d, s.numel());
        Buffer<float> dgamma(d, 12), dbeta(d, 12);
        NormArgs a;
        a.groups = groups, a.mean = mean.data(), a.istd = istd.data(), a.sums = sums.data(), a.coef = coef.data();
        if (affine) a.gamma = gb.data(), a.beta = bb.data(), a.dgamma = dgamma.data(), a.dbeta = dbeta.data();
        group_norm_stats(d, xb.data(), s, 1e-3, a);
        group_norm_apply(d, xb.data(), s, a, y.data());
        group_norm_backward(d, xb.data(), dyb.data(), s, a, dx.data());
        std::vector<std::vector<float>> r{download(mean), download(istd), download(y), download(dx)};
        if (affine) r.push_back(download(dgamma)), r.push_back(download(dbeta));
        if (affine) {  // no dx wanted: the same weight gradients
          Buffer<float> dgamma2(d, 12), dbeta2(d, 12);
          NormArgs a2 = a;
          a2.dgamma = dgamma2.data(), a2.dbeta = dbeta2.data();
          group_norm_backward(d, xb.data(), dyb.data(), s, a2, nullptr);
          CHECK(download(dgamma2) == download(dgamma));
          CHECK(download(dbeta2) == download(dbeta));
        }
        a.dgamma = a.dbeta = nullptr;
        group_norm_backward(d, xb.data(), dyb.data(), s, a, dyb.data());  // in place
        r.push_back(download(dyb));
        return r;
      };
      const auto ref = run(Device{}), got = run(g.device);
      // Double sums in another order, then float: a few ulp.
      const char* names[] = {"mean", "istd", "y", "dx", "dgamma", "dbeta"};
      for (size_t i = 0; i + 1 < ref.size(); ++i) CHECK_CLOSE(names[i], got[i], ref[i], 1e-5);
      CHECK_CLOSE("dx in place", got.back(), ref[3], 1e-5);
    }
  }
  // A tower with no sample this step: nothing to normalise, weight gradients 0.
  const Shape none{0, 7, 5, 12};
  Buffer<double> sums(g.device, 0);
  Buffer<float> empty(g.device, 0), dgamma = upload(gamma, g.device), dbeta = upload(beta, g.device);
  NormArgs a;
  a.groups = 3, a.mean = a.istd = a.coef = empty.data(), a.sums = sums.data();
  a.gamma = dgamma.data(), a.beta = dbeta.data(), a.dgamma = dgamma.data(), a.dbeta = dbeta.data();
  group_norm_stats(g.device, empty.data(), none, 1e-3, a);
  group_norm_apply(g.device, empty.data(), none, a, empty.data());
  group_norm_backward(g.device, empty.data(), empty.data(), none, a, empty.data());
  CHECK(download(dgamma) == std::vector<float>(12, 0.f));
  CHECK(download(dbeta) == std::vector<float>(12, 0.f));
}

TEST_CASE("GPU LayerNormalization matches the CPU: statistics, forward and backward", "[gpu][gpu_ops][layer_norm]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  // A few rows of 12 channels, and more rows than one pass of the grid's warps (8192 blocks of 8) with 40
  // channels (two passes of a warp's lanes, two channel tiles and several ranges in the weight gradients).
  struct Case {
    size_t rows;
    int C;
  };
  for (const Case c : {Case{105, 12}, Case{70000, 40}}) {
    const size_t rows = c.rows, n = rows * size_t(c.C);
    const int C = c.C;
    const std::vector<float> x = random_values(n, 391, -1.f, 4.f), dy = random_values(n, 392);
    const std::vector<float> gamma = random_values(size_t(C), 393, 0.5f, 1.5f), beta = random_values(size_t(C), 394);
    for (const bool affine : {true, false}) {
      INFO(rows << " rows of " << C << (affine ? ", gamma and beta" : ", neither"));
      auto run = [&](const Device& d) {
        Buffer<float> xb = upload(x, d), dyb = upload(dy, d), gb = upload(gamma, d), bb = upload(beta, d);
        Buffer<float> mean(d, rows), istd(d, rows), y(d, n), dx(d, n), dgamma(d, size_t(C)), dbeta(d, size_t(C));
        const Shape rs{int(rows), 1, 1, C};
        NormArgs a;
        a.mean = mean.data(), a.istd = istd.data();
        if (affine) a.gamma = gb.data(), a.beta = bb.data(), a.dgamma = dgamma.data(), a.dbeta = dbeta.data();
        layer_norm_stats(d, xb.data(), rs, 1e-3, a);
        group_norm_apply(d, xb.data(), rs, a, y.data());
        layer_norm_backward(d, xb.data(), dyb.data(), rs, a, dx.data());
        std::vector<std::vector<float>> r{download(mean), download(istd), download(y), download(dx)};
        if (affine) {
          r.push_back(download(dgamma)), r.push_back(download(dbeta));
          Buffer<float> dgamma2(d, size_t(C)), dbeta2(d, size_t(C));  // no dx wanted: the same weight gradients
          NormArgs a2 = a;
          a2.dgamma = dgamma2.data(), a2.dbeta = dbeta2.data();
          layer_norm_backward(d, xb.data(), dyb.data(), rs, a2, nullptr);
          CHECK(download(dgamma2) == download(dgamma));
          CHECK(download(dbeta2) == download(dbeta));
        }
        a.dgamma = a.dbeta = nullptr;
        layer_norm_backward(d, xb.data(), dyb.data(), rs, a, dyb.data());  // in place
        r.push_back(download(dyb));
        return r;
      };
      const auto ref = run(Device{}), got = run(g.device);
      // Double sums in another order, then float: a few ulp (the weight gradients sum up to 70000 terms).
      const char* names[] = {"mean", "istd", "y", "dx", "dgamma", "dbeta"};
      for (size_t i = 0; i + 1 < ref.size(); ++i) CHECK_CLOSE(names[i], got[i], ref[i], 1e-5);
      CHECK_CLOSE("dx in place", got.back(), ref[3], 1e-5);
    }
  }
  // A tower with no sample this step: weight gradients 0.
  Buffer<float> empty(g.device, 0), dgamma = upload(std::vector<float>(12, 1.f), g.device),
                                    dbeta = upload(std::vector<float>(12, 1.f), g.device);
  NormArgs a;
  a.mean = a.istd = empty.data(), a.dgamma = dgamma.data(), a.dbeta = dbeta.data();
  const Shape none{0, 1, 1, 12};
  layer_norm_stats(g.device, empty.data(), none, 1e-3, a);
  layer_norm_backward(g.device, empty.data(), empty.data(), none, a, empty.data());
  CHECK(download(dgamma) == std::vector<float>(12, 0.f));
  CHECK(download(dbeta) == std::vector<float>(12, 0.f));
}
