#pragma once
// CachedConvOp: the CPU backend of Conv2DOp and Conv2DTransposeOp
// (backend/ops.h) over ConvPrimitives, with fp32 or bf16 activations.
// Internal to backend/cpu.
#include <memory>
#include <string>

#include "backend/cpu/typed_passes.h"
#include "backend/cpu/conv_algorithm.h"
#include "backend/cpu/conv_primitives.h"

namespace trainer::cpu {

/// The case-dependent part of an op's problem: for input shape xs and output
/// shape ys, the padding of the convolution and the layout of the caller's
/// kernel (make_conv_problem does the rest).
using ConvProblemFn = ConvProblem (*)(Shape xs, Shape ys, const Conv2DParams& p, bool with_bias);

/// Cache key of a convolution-like problem: shapes, bias, the activations'
/// types and layouts, and whether the forward fuses a ReLU.
struct ConvKey {
  Shape xs, ys;
  bool with_bias = true;
  DType x = DType::F32, y = DType::F32;
  bool relu = false;
  Layout x_layout = Layout::NHWC, y_layout = Layout::NHWC;
  bool operator==(const ConvKey& o) const {
    return xs == o.xs && ys == o.ys && with_bias == o.with_bias && x == o.x && y == o.y && relu == o.relu &&
           x_layout == o.x_layout && y_layout == o.y_layout;
  }
};

/// Prims (ConvPrimitives, or PatchDeconvPrimitives: the same interface)
/// cached per ConvKey, built from problem(key) on first use. A plain ReLU runs as oneDNN's post-op; any other activation in the
/// CPU backend's own pass. With bf16 wanted (Device::precision) a problem
/// that bf16_convolution allows and oneDNN runs in bf16 (ConvPrimitives::fast_kernels) reads and writes
/// the activations in their own types, rounding an fp32 input to bf16 in
/// this thread's scratch; any other problem computes in fp32, converting bf16
/// activations through the scratch. An fp32 convolution runs on oneDNN's
/// Winograd kernels where winograd_pays and oneDNN has them for it, else on
/// its direct ones. Arguments as in ops.h.
template <class Prims>
class CachedConvOp final : public ConvBackend {
 public:
  CachedConvOp(Conv2DParams p, dnnl::algorithm algo, ConvProblemFn problem, bool bf16)
      : p_(p), algo_(algo), problem_(problem), bf16_(bf16) {}

  void forward(ConstTensorView x, ConvWeights w, Activation act, TensorView y) override {
    const bool relu = plain_relu(act);
    Prims& prims = get({x.shape, y.shape, w.bias != nullptr, x.dtype, y.dtype, relu, x.layout, y.layout});
    const DType compute = dtype_of(prims.problem().compute), dst = dtype_of(prims.problem().dst_type);
    const size_t nx = x.shape.numel(), ny = y.shape.numel();
    const auto parts = thread_scratch_parts<2>(
        {x.dtype != compute ? nx * dtype_size(compute) : 0, y.dtype != dst ? ny * dtype_size(dst) : 0});
    const void* src = x.data;
    if (parts[0]) convert(x.dtype, x.data, compute, parts[0], nx), src = parts[0];
    void* out = parts[1] ? parts[1] : y.data;
    prims.forward(src, w.kernel, w.bias, out, ++forward_calls_);
    if (!relu) typed_activation_forward(act, dst, out, ny);
    if (parts[1]) convert(dst, out, y.dtype, y.data, ny);
  }

  /// dz = dy * act'(y) in the compute type (one pass; none for a linear
  /// activation on dy of that type, and made in the passes' own layout where
  /// they take a blocked one: keep_relu_gradient), then backward-weights
  /// (unless dkernel is nullptr: a frozen layer) and backward-data (unless
  /// dx is nullptr).
  void backward(const ConvBackwardArgs& a) override {
    const Shape xs = a.x.shape, ys = a.y.shape;
    const ConvKey key{xs, ys, a.dbias != nullptr, a.x.dtype, a.y.dtype, plain_relu(a.act), a.x.layout, a.y.layout};
    Prims* pw = a.dkernel ? &get(key) : nullptr;
    Prims* pd = a.dx ? &get_any_bias(key) : nullptr;
    if (!pw && !pd) return;
    const uint64_t call = ++backward_calls_;
    const DType compute = dtype_of((pw ? pw : pd)->problem().compute);
    const DType diff_src = pd ? dtype_of(pd->problem().diff_src_type) : a.x.dtype;
    const size_t nx = xs.numel(), ny = ys.numel();
    const bool blocked_dz = key.relu && a.y.dtype == DType::F32 && keep_relu_gradient(pw, pd, a, call);
    const bool dz_pass = !blocked_dz && !(a.act.linear() && a.y.dtype == compute);
    const auto parts = thread_scratch_parts<3>({dz_pass ? ny * dtype_size(compute) : 0,
                                                pw && a.x.dtype != compute ? nx * dtype_size(compute) : 0,
                                                pd && a.x.dtype != diff_src ? nx * dtype_size(diff_src) : 0});
    const void* dz = a.dy;  // with blocked_dz: the key of the passes' kept dz
    if (parts[0]) typed_activation_backward(a.act, a.y.dtype, a.y.data, a.dy, compute, parts[0], ny), dz = parts[0];
    if (pw) {
      const void* x = a.x.data;
      if (parts[1]) convert(a.x.dtype, x, compute, parts[1], nx), x = parts[1];
      pw->backward_weights(x, dz, a.dkernel, a.dbias, forward_calls_, call);
    }
    if (pd) {
      pd->backward_data(dz, a.kernel, parts[2] ? parts[2] : a.dx, call);
      if (parts[2]) convert(diff_src, parts[2], a.x.dtype, a.dx, nx);
    }
  }

  /// Whether the problem of xs -> ys runs on Winograd (with a bias and a
  /// ReLU, as U-Nets have; neither changes the algorithm).
  bool takes_blocked(Shape xs, Shape ys, DType x, DType y) override {
    return winograd(problem(ConvKey{xs, ys, true, x, y, true}));
  }

  /// The oneDNN problem a call of key runs: computing in bf16 where wanted,
  /// bf16_convolution allows (ops.h: a one-filter mask layer computes in
  /// fp32) and oneDNN has it for these shapes and types (the same answer whatever
  /// the bias and ReLU, so that the entries of one shape agree), on Winograd
  /// where winograd_pays and oneDNN has its kernels, else on direct kernels.
  ConvProblem problem(const ConvKey& k) const {
    ConvProblem pb = problem_(k.xs, k.ys, p_, k.with_bias);
    pb.relu = k.relu;
    pb.algo = algo_;
    pb.blocked_src = blocked(k.x_layout, k.xs), pb.blocked_dst = blocked(k.y_layout, k.ys);
    const int filters = algo_ == dnnl::algorithm::deconvolution_direct ? k.xs.c : k.ys.c;
    if (bf16_ && bf16_convolution(filters, p_.groups)) {
      ConvProblem probe = problem_(k.xs, k.ys, p_, true);
      probe.algo = algo_, probe.compute = dt::bf16, probe.dst_type = dnnl_type(k.y), probe.diff_src_type = dnnl_type(k.x);
      if (Prims::fast_kernels(probe)) pb.compute = probe.compute, pb.dst_type = probe.dst_type, pb.diff_src_type = probe.diff_src_type;
    }
    if (algo_ == dnnl::algorithm::convolution_direct && winograd_pays(pb)) {
      ConvProblem wino = pb;
      wino.algo = dnnl::algorithm::convolution_winograd;
      if (Prims::fast_kernels(wino)) pb.algo = wino.algo;
    }
    return pb;
  }

 private:
  using dt = dnnl::memory::data_type;
  static DType dtype_of(dt t) { return t == dt::bf16 ? DType::BF16 : DType::F32; }
  static dt dnnl_type(DType t) { return t == DType::BF16 ? dt::bf16 : dt::f32; }
  /// max(0, y), which oneDNN applies as a post-op.
  static bool plain_relu(Activation a) { return a.kind == ActivationKind::Relu; }
  /// Whether an activation of shape s is held in Layout::Blocked16;
  /// InternalError when its channels are not a multiple of 16.
  static bool blocked(Layout l, Shape s) {
    if (l != Layout::Blocked16) return false;
    if (s.c % 16 != 0) throw InternalError("a convolution's activation of " + std::to_string(s.c) +
                                           " channels in the 16-channel blocked layout");
    return true;
  }

  /// Prims::keep_relu_gradient for the passes this backward runs (pw: the
  /// weights', pd: the data's; one call when they share primitives), all or
  /// none: false when one of them cannot take it.
  static bool keep_relu_gradient(Prims* pw, Prims* pd, const ConvBackwardArgs& a, uint64_t call) {
    const auto* y = static_cast<const float*>(a.y.data);
    const auto* dy = static_cast<const float*>(a.dy);
    if (pw == pd || !pw || !pd) return (pw ? pw : pd)->keep_relu_gradient(y, dy, call, pw != nullptr, pd != nullptr);
    return pw->keep_relu_gradient(y, dy, call, true, false) && pd->keep_relu_gradient(y, dy, call, false, true);
  }

  Prims& get(const ConvKey& k) {
    return cache_.get(k, [&] { return std::make_unique<Prims>(problem(k)); });
  }
  /// Backward-data ignores the bias: reuse the forward's entry, whichever it is.
  Prims& get_any_bias(ConvKey k) {
    k.with_bias = true;
    if (Prims* c = cache_.find(k)) return *c;
    k.with_bias = false;
    return get(k);
  }

  Conv2DParams p_;
  dnnl::algorithm algo_;
  ConvProblemFn problem_;
  bool bf16_;
  PrimitiveCache<ConvKey, Prims> cache_;
  /// Name each forward and backward call, so that the primitives reuse an
  /// input's reorder only within the forward it belongs to and its backward
  /// (KeptInput).
  uint64_t forward_calls_ = 0, backward_calls_ = 0;
};

}  // namespace trainer::cpu
