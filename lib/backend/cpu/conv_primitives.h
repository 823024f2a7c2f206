#pragma once
// oneDNN primitives of one convolution-like problem (convolution or
// deconvolution) for one input shape: forward, backward-data and
// backward-weights, with NHWC activations and weights kept in Keras's layout
// at the interface. oneDNN picks its own weight format inside ('any'); the
// weights are reordered to and from Keras's layout around each call (a few
// kilobytes, negligible next to the convolution). Internal to backend/cpu.
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <optional>
#include <unordered_map>

#include "backend/cpu/dnnl_context.h"
#include "backend/device_ops.h"
#include "backend/ops.h"
#include "core/buffer.h"
#include "core/shape.h"

namespace trainer::cpu {

/// Logical oneDNN dimensions of one problem (activations {N, C, H, W}, weights
/// {O, I, KH, KW}, or {G, O / G, I / G, KH, KW} grouped, bias {O}) plus the
/// memory layout of the caller's weights.
struct ConvProblem {
  dnnl::memory::dims src, weights, bias, dst, strides, pad_l, pad_r;
  dnnl::memory::dims dilates;  ///< oneDNN's dilation: pixels skipped between taps (Keras's dilation_rate - 1).
  dnnl::memory::desc user_weights;  ///< Keras layout of the kernel.
  bool with_bias = true;
};

/// The problem for input xs [N, H, W, Cin] and output ys [N, Ho, Wo, Cout]:
/// weights {Cout, Cin, kh, kw}, the given padding, user_weights as the caller's
/// kernel layout.
inline ConvProblem make_conv_problem(Shape xs, Shape ys, const Conv2DParams& p, PadPair ph,
                                     PadPair pw, const dnnl::memory::desc& user_weights,
                                     bool with_bias) {
  ConvProblem pb;
  pb.src = {xs.n, xs.c, xs.h, xs.w};
  pb.dst = {ys.n, ys.c, ys.h, ys.w};
  pb.weights = {ys.c, xs.c, p.kh, p.kw};
  pb.bias = {ys.c};
  pb.strides = {p.stride_h, p.stride_w};
  pb.dilates = {p.dilation_h - 1, p.dilation_w - 1};
  pb.pad_l = {ph.before, pw.before};
  pb.pad_r = {ph.after, pw.after};
  pb.user_weights = user_weights;
  pb.with_bias = with_bias;
  return pb;
}

/// Cache key of a convolution-like problem.
struct ConvKey {
  Shape xs, ys;
  bool with_bias;
  bool operator==(const ConvKey& o) const {
    return xs == o.xs && ys == o.ys && with_bias == o.with_bias;
  }
};

/// A tensor (weights, or an activation where the library wants its own
/// layout) as the caller holds it and as a primitive wants it; `lib` is `user`
/// itself when the formats agree, else a library-owned buffer with a cached
/// reorder between the two.
struct MemoryPair {
  dnnl::memory user, lib;
  std::optional<dnnl::reorder> to_lib, to_user;
  MemoryPair(const dnnl::memory::desc& user_md, const dnnl::memory::desc& lib_md, bool into_lib) {
    user = dnnl::memory(user_md, cpu_engine(), DNNL_MEMORY_NONE);
    if (user_md == lib_md) {
      lib = user;
    } else {
      lib = dnnl::memory(lib_md, cpu_engine());
      if (into_lib) to_lib = dnnl::reorder(user, lib);
      else to_user = dnnl::reorder(lib, user);
    }
  }
  /// Copies the user's data into the library's layout (nothing when they agree).
  void reorder_in() {
    if (to_lib) execute(*to_lib, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, lib}}, "reorder");
  }
};

/// Whether oneDNN's backward-weights must not see this problem's activations
/// in NHWC: a 1x1 kernel with a stride above 1, where oneDNN 2.x's 1x1
/// kernels (jit_1x1, which reduce the stride by copying the input into a
/// workspace) write past that workspace when the input has fewer channels
/// than their block (8 on AVX2, 16 on AVX-512), which hangs the threads in
/// a barrier, crashes or gives wrong gradients (uxlfoundation/oneDNN issue
/// 6035; a Conv2DTranspose with kernel_size 1 and strides 2 hung our CPU
/// training in 2 of 3 runs). Such problems let oneDNN choose a blocked
/// layout and are reordered into it, which avoids the faulty path.
inline bool strided_1x1(const ConvProblem& pb) {
  const size_t r = pb.weights.size();  // {O, I, kh, kw}, or grouped {G, O / G, I / G, kh, kw}
  return pb.weights[r - 2] == 1 && pb.weights[r - 1] == 1 && (pb.strides[0] > 1 || pb.strides[1] > 1);
}

/// Forward, backward-data and backward-weights primitives of one problem, with
/// their memory objects and argument maps built once; each call only sets
/// data handles and executes. Fwd/BwdData/BwdWeights are oneDNN's
/// convolution_* or deconvolution_* primitives (their v2 descs share signatures).
template <class Fwd, class BwdData, class BwdWeights>
class ConvPrimitives {
  using md = dnnl::memory::desc;
  using tag = dnnl::memory::format_tag;
  static constexpr auto f32 = dnnl::memory::data_type::f32;

 public:
  /// Builds the forward primitive; backward ones are built on first use.
  /// Throws InternalError when oneDNN rejects the problem.
  ConvPrimitives(const ConvProblem& pb, dnnl::algorithm algo) : pb_(pb), algo_(algo) {
    try {
      auto& eng = cpu_engine();
      md src_md(pb.src, f32, tag::nhwc), dst_md(pb.dst, f32, tag::nhwc);
      md w_any(pb.weights, f32, tag::any), b_md(pb.bias, f32, tag::a);
      auto d = pb.with_bias ? typename Fwd::desc(dnnl::prop_kind::forward_training, algo, src_md,
                                                 w_any, b_md, dst_md, pb.strides, pb.dilates, pb.pad_l, pb.pad_r)
                            : typename Fwd::desc(dnnl::prop_kind::forward_training, algo, src_md,
                                                 w_any, dst_md, pb.strides, pb.dilates, pb.pad_l, pb.pad_r);
      fwd_pd_ = typename Fwd::primitive_desc(d, user_scratchpad_attr(), eng);
      fwd_ = Fwd(fwd_pd_);
      src_ = dnnl::memory(src_md, eng, DNNL_MEMORY_NONE);
      dst_ = dnnl::memory(dst_md, eng, DNNL_MEMORY_NONE);
      bias_ = dnnl::memory(b_md, eng, DNNL_MEMORY_NONE);
      fwd_w_.emplace(pb.user_weights, fwd_pd_.weights_desc(), true);
      fwd_scratch_ = dnnl::memory(fwd_pd_.scratchpad_desc(), eng);
      fwd_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, fwd_w_->lib}, {DNNL_ARG_DST, dst_},
                   {DNNL_ARG_SCRATCHPAD, fwd_scratch_}};
      if (pb.with_bias) fwd_args_[DNNL_ARG_BIAS] = bias_;
    } catch (const dnnl::error& e) {
      throw_dnnl_setup_error("forward setup", e);
    }
  }

  /// y <- op(x, w) (+ b). Pointers as described by the problem.
  void forward(const float* x, const float* w, const float* b, float* y) {
    fwd_w_->user.set_data_handle(const_cast<float*>(w));
    fwd_w_->reorder_in();
    src_.set_data_handle(const_cast<float*>(x));
    dst_.set_data_handle(y);
    if (pb_.with_bias) bias_.set_data_handle(const_cast<float*>(b));
    execute(fwd_, fwd_args_, "forward");
  }

  /// dx <- dL/dx from dy.
  void backward_data(const float* dy, const float* w, float* dx) {
    if (!bwd_data_) build_backward_data();
    bd_w_->user.set_data_handle(const_cast<float*>(w));
    bd_w_->reorder_in();
    bd_diff_dst_.set_data_handle(const_cast<float*>(dy));
    bd_diff_src_.set_data_handle(dx);
    execute(*bwd_data_, bd_args_, "backward-data");
  }

  /// dw (and db when the problem has a bias) <- dL/dw from x and dy.
  void backward_weights(const float* x, const float* dy, float* dw, float* db) {
    if (!bwd_w_) build_backward_weights();
    bw_src_->user.set_data_handle(const_cast<float*>(x));
    bw_diff_dst_->user.set_data_handle(const_cast<float*>(dy));
    bw_src_->reorder_in();
    bw_diff_dst_->reorder_in();
    bw_w_->user.set_data_handle(dw);
    if (pb_.with_bias) bw_bias_.set_data_handle(db);
    execute(*bwd_w_, bw_args_, "backward-weights");
    if (bw_w_->to_user) execute(*bw_w_->to_user, {{DNNL_ARG_FROM, bw_w_->lib}, {DNNL_ARG_TO, bw_w_->user}}, "weight reorder");
  }

 private:
  void build_backward_data() {
    try {
      auto& eng = cpu_engine();
      md src_md(pb_.src, f32, tag::nhwc), dst_md(pb_.dst, f32, tag::nhwc);
      md w_any(pb_.weights, f32, tag::any);
      typename BwdData::desc d(algo_, src_md, w_any, dst_md, pb_.strides, pb_.dilates, pb_.pad_l, pb_.pad_r);
      typename BwdData::primitive_desc pd(d, user_scratchpad_attr(), eng, fwd_pd_);
      bwd_data_ = BwdData(pd);
      bd_w_.emplace(pb_.user_weights, pd.weights_desc(), true);
      bd_diff_src_ = dnnl::memory(src_md, eng, DNNL_MEMORY_NONE);
      bd_diff_dst_ = dnnl::memory(dst_md, eng, DNNL_MEMORY_NONE);
      bd_scratch_ = dnnl::memory(pd.scratchpad_desc(), eng);
      bd_args_ = {{DNNL_ARG_DIFF_DST, bd_diff_dst_}, {DNNL_ARG_WEIGHTS, bd_w_->lib},
                  {DNNL_ARG_DIFF_SRC, bd_diff_src_}, {DNNL_ARG_SCRATCHPAD, bd_scratch_}};
    } catch (const dnnl::error& e) {
      throw_dnnl_setup_error("backward-data setup", e);
    }
  }

  void build_backward_weights() {
    try {
      auto& eng = cpu_engine();
      md src_md(pb_.src, f32, tag::nhwc), dst_md(pb_.dst, f32, tag::nhwc);
      md w_any(pb_.weights, f32, tag::any), b_md(pb_.bias, f32, tag::a);
      // See strided_1x1: those problems take the library's activation layout.
      const bool own_layout = strided_1x1(pb_);
      const md src_lib = own_layout ? md(pb_.src, f32, tag::any) : src_md;
      const md dst_lib = own_layout ? md(pb_.dst, f32, tag::any) : dst_md;
      auto d = pb_.with_bias
                   ? typename BwdWeights::desc(algo_, src_lib, w_any, b_md, dst_lib, pb_.strides,
                                               pb_.dilates, pb_.pad_l, pb_.pad_r)
                   : typename BwdWeights::desc(algo_, src_lib, w_any, dst_lib, pb_.strides, pb_.dilates,
                                               pb_.pad_l, pb_.pad_r);
      typename BwdWeights::primitive_desc pd(d, user_scratchpad_attr(), eng, fwd_pd_);
      bwd_w_ = BwdWeights(pd);
      bw_w_.emplace(pb_.user_weights, pd.diff_weights_desc(), false);
      bw_src_.emplace(src_md, pd.src_desc(), true);
      bw_diff_dst_.emplace(dst_md, pd.diff_dst_desc(), true);
      bw_bias_ = dnnl::memory(b_md, eng, DNNL_MEMORY_NONE);
      bw_scratch_ = dnnl::memory(pd.scratchpad_desc(), eng);
      bw_args_ = {{DNNL_ARG_SRC, bw_src_->lib}, {DNNL_ARG_DIFF_DST, bw_diff_dst_->lib},
                  {DNNL_ARG_DIFF_WEIGHTS, bw_w_->lib}, {DNNL_ARG_SCRATCHPAD, bw_scratch_}};
      if (pb_.with_bias) bw_args_[DNNL_ARG_DIFF_BIAS] = bw_bias_;
    } catch (const dnnl::error& e) {
      throw_dnnl_setup_error("backward-weights setup", e);
    }
  }

  ConvProblem pb_;
  dnnl::algorithm algo_;
  typename Fwd::primitive_desc fwd_pd_;
  Fwd fwd_;
  dnnl::memory src_, dst_, bias_, fwd_scratch_;
  std::optional<MemoryPair> fwd_w_;
  std::unordered_map<int, dnnl::memory> fwd_args_;

  std::optional<BwdData> bwd_data_;
  std::optional<MemoryPair> bd_w_;
  dnnl::memory bd_diff_src_, bd_diff_dst_, bd_scratch_;
  std::unordered_map<int, dnnl::memory> bd_args_;

  std::optional<BwdWeights> bwd_w_;
  std::optional<MemoryPair> bw_w_;
  std::optional<MemoryPair> bw_src_, bw_diff_dst_;
  dnnl::memory bw_bias_, bw_scratch_;
  std::unordered_map<int, dnnl::memory> bw_args_;
};

/// The case-dependent part of an op's problem: for input shape xs and output
/// shape ys, the padding of the convolution and the layout of the caller's
/// kernel (make_conv_problem does the rest).
using ConvProblemFn = ConvProblem (*)(Shape xs, Shape ys, const Conv2DParams& p, bool with_bias);

/// The CPU backend of Conv2DOp and Conv2DTransposeOp (backend/ops.h):
/// ConvPrimitives cached per (input shape, output shape, bias), built from
/// problem() and algo on first use; each call forwards to its entry. Arguments
/// as in ops.h.
template <class Fwd, class BwdData, class BwdWeights>
class CachedConvOp final : public ConvBackend {
  using Prims = ConvPrimitives<Fwd, BwdData, BwdWeights>;

 public:
  CachedConvOp(Conv2DParams p, dnnl::algorithm algo, ConvProblemFn problem)
      : p_(p), algo_(algo), problem_(problem) {}

  /// The convolution on oneDNN, then the activation (the CPU backend's own
  /// loop, as for every other layer). fp32 only (InternalError for bf16).
  void forward(ConstTensorView x, ConvWeights w, Activation act, TensorView y) override {
    const char* what = "a convolution on the CPU";
    const float* in = x.f32(what);
    float* out = y.f32(what);
    get(x.shape, y.shape, w.bias != nullptr).forward(in, w.kernel, w.bias, out);
    cpu::activation_forward(Device{}, act, out, y.shape.numel());
  }
  /// dz = dy * act'(y) into the thread's scratch (the CPU backend's activation loop), then
  /// oneDNN's backward-weights (unless dkernel is nullptr: a frozen layer) and
  /// backward-data (unless dx is nullptr) on it. fp32 only.
  void backward(const ConvBackwardArgs& a) override {
    const char* what = "a convolution on the CPU";
    const Shape xs = a.x.shape, ys = a.y.shape;
    const float* dz = static_cast<const float*>(a.dy);
    require_f32(a.y.dtype, what);
    require_f32(a.x.dtype, what);
    if (!a.act.linear()) {
      float* scratch = thread_scratch(ys.numel());
      cpu::activation_backward(Device{}, a.act, a.y.f32(what), dz, scratch, ys.numel());
      dz = scratch;
    }
    if (a.dkernel) get(xs, ys, a.dbias != nullptr).backward_weights(a.x.f32(what), dz, a.dkernel, a.dbias);
    if (a.dx) get_any_bias(xs, ys).backward_data(dz, a.kernel, static_cast<float*>(a.dx));
  }

 private:
  Prims& get(Shape xs, Shape ys, bool with_bias) {
    return cache_.get(ConvKey{xs, ys, with_bias}, [&] {
      return std::make_unique<Prims>(problem_(xs, ys, p_, with_bias), algo_);
    });
  }
  /// Backward-data ignores the bias: reuse the forward's entry, whichever it is.
  Prims& get_any_bias(Shape xs, Shape ys) {
    if (Prims* c = cache_.find(ConvKey{xs, ys, true})) return *c;
    return get(xs, ys, false);
  }

  Conv2DParams p_;
  dnnl::algorithm algo_;
  ConvProblemFn problem_;
  PrimitiveCache<ConvKey, Prims> cache_;
};

}  // namespace trainer::cpu
