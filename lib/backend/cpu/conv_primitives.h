#pragma once
// oneDNN primitives of one convolution-like problem (convolution or
// deconvolution) for one input shape: forward, backward-data and
// backward-weights, with NHWC activations (or Layout::Blocked16 ones where
// the caller holds them so) and weights kept in Keras's layout at the
// interface. oneDNN picks its own weight format inside ('any'); the
// weights are reordered to and from Keras's layout around each call (a few
// kilobytes, negligible next to the convolution). A Winograd convolution
// (ConvProblem::algo) takes its activations in oneDNN's blocked layout too:
// those the caller holds in another layout are reordered, its input and dz
// into copies it keeps (KeptInput, so that each is reordered once a step),
// its output and input gradient through this thread's primitive scratch. In
// bf16 (CPU towers with training.precision bf16) the activations are read in
// bf16, the weights rounded to bf16 inside, accumulation and weight gradients
// are fp32, and the activations written (output, input gradient) are of the
// caller's types. Internal to backend/cpu.
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "backend/cpu/blocked_relu_gradient.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/dnnl_memory.h"
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
  bool relu = false;  ///< The forward applies max(0, y) as a post-op (oneDNN eltwise_relu).
  /// oneDNN's algorithm: convolution_direct / deconvolution_direct, or
  /// convolution_winograd (conv_algorithm.h says when).
  dnnl::algorithm algo = dnnl::algorithm::convolution_direct;
  /// Types of src and diff_dst (and of the weights inside): f32, or bf16 with
  /// fp32 accumulation.
  dnnl::memory::data_type compute = dnnl::memory::data_type::f32;
  /// Types of dst and diff_src as the caller holds them: f32, or bf16 where compute is bf16.
  dnnl::memory::data_type dst_type = dnnl::memory::data_type::f32, diff_src_type = dnnl::memory::data_type::f32;
  /// The caller holds x and dx (blocked_src), y and dy (blocked_dst) in
  /// Layout::Blocked16 (oneDNN's nChw16c) rather than NHWC.
  bool blocked_src = false, blocked_dst = false;
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

/// Whether pb runs on oneDNN's Winograd kernels, which take activations in
/// its blocked layout only.
inline bool winograd(const ConvProblem& pb) { return pb.algo == dnnl::algorithm::convolution_winograd; }

/// Whether a pass of pb takes its activations in the library's layout (tag
/// any) rather than NHWC; backward_weights says whether the pass is that one.
inline bool library_activations(const ConvProblem& pb, bool backward_weights) {
  return winograd(pb) || (backward_weights && strided_1x1(pb));
}

/// Whether a primitive is, or wraps, oneDNN's reference (plain C++) implementation.
template <class PD>
bool reference_impl(const PD& pd) {
  return std::string(pd.impl_info_str()).find("ref") != std::string::npos;  // a deconvolution's: "conv:any+ref:any"
}

/// Whether oneDNN has kernels for all three passes of pb, as the primitive
/// descriptors fwd(pb), bwd_data(pb, fwd's) and bwd_weights(pb, fwd's) make
/// them, and none is its reference implementation (far slower than fp32 in
/// bf16): the test behind ConvPrimitives::fast_kernels and its kin.
template <class MakeFwd, class MakeBwdData, class MakeBwdWeights>
bool fast_passes(const ConvProblem& pb, MakeFwd fwd, MakeBwdData bwd_data, MakeBwdWeights bwd_weights) {
  try {
    const auto f = fwd(pb);
    return !reference_impl(f) && !reference_impl(bwd_data(pb, f)) && !reference_impl(bwd_weights(pb, f));
  } catch (const dnnl::error&) {
    return false;
  }
}

/// Forward, backward-data and backward-weights primitives of one problem, with
/// their memory objects and argument maps built once; each call only sets
/// data handles and executes. Fwd/BwdData/BwdWeights are oneDNN's
/// convolution_* or deconvolution_* primitives (their v2 descs share
/// signatures). Activations are NHWC of the problem's types (ConvProblem:
/// compute, dst_type, diff_src_type); with bf16 compute the weights are rounded to bf16
/// inside, and accumulation, diff_weights and diff_bias stay fp32 (oneDNN's
/// bf16 convolutions). Scratchpads and outputs in the library's layout live
/// in this thread's primitive scratch for the call only; inputs in the
/// library's layout are kept (see the file comment).
template <class Fwd, class BwdData, class BwdWeights>
class ConvPrimitives {
  using md = dnnl::memory::desc;
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;

 public:
  /// Builds the forward primitive; backward ones are built on first use.
  /// Throws InternalError when oneDNN rejects the problem.
  explicit ConvPrimitives(const ConvProblem& pb) : pb_(pb) {
    build_forward();
  }
  ConvPrimitives(const ConvPrimitives&) = delete;  // bw_src_ and the other pointers point into the object
  ConvPrimitives& operator=(const ConvPrimitives&) = delete;

 private:
  void build_forward() {
    const ConvProblem& pb = pb_;
    try {
      auto& eng = cpu_engine();
      fwd_pd_ = make_fwd_pd(pb);
      fwd_ = Fwd(fwd_pd_);
      src_.emplace(md(pb.src, pb.compute, user_tag(pb.blocked_src)), fwd_pd_.src_desc());
      dst_.emplace(md(pb.dst, pb.dst_type, user_tag(pb.blocked_dst)), fwd_pd_.dst_desc(), false, true);
      bias_ = dnnl::memory(md(pb.bias, dt::f32, tag::a), eng, DNNL_MEMORY_NONE);
      fwd_w_.emplace(pb.user_weights, fwd_pd_.weights_desc(), true);
      fwd_scratch_ = dnnl::memory(fwd_pd_.scratchpad_desc(), eng, DNNL_MEMORY_NONE);
      fwd_args_ = {{DNNL_ARG_SRC, src_->lib()}, {DNNL_ARG_WEIGHTS, fwd_w_->lib}, {DNNL_ARG_DST, dst_->lib},
                   {DNNL_ARG_SCRATCHPAD, fwd_scratch_}};
      if (pb.with_bias) fwd_args_[DNNL_ARG_BIAS] = bias_;
    } catch (const dnnl::error& e) {
      throw_dnnl_setup_error("forward setup", e);
    }
  }

 public:
  /// Whether oneDNN runs all three passes of pb with its optimized kernels
  /// (not its reference ones, far slower than fp32 in bf16): false also
  /// where it has no kernel for pb at all (a Winograd problem it rejects).
  static bool fast_kernels(const ConvProblem& pb) {
    return fast_passes(pb, make_fwd_pd, make_bwd_data_pd, make_bwd_weights_pd);
  }

  /// The problem these primitives run (types and algorithm as built).
  const ConvProblem& problem() const { return pb_; }

  /// y <- op(x, w) (+ b) (then max(0, y) with pb.relu): x [N, H, W, Cin] of
  /// type compute, y [N, Ho, Wo, Cout] of type dst_type, w and b fp32.
  /// forward_stamp names the call (a new number each forward of the op):
  /// backward_weights with the same x and stamp reuses x's reorder.
  void forward(const void* x, const float* w, const float* b, void* y, uint64_t forward_stamp) {
    fwd_w_->user.set_data_handle(const_cast<float*>(w));
    fwd_w_->reorder_in();
    bind_per_call(fwd_scratch_, {&*dst_});
    src_->get(x, forward_stamp);
    dst_->user.set_data_handle(y);
    if (pb_.with_bias) bias_.set_data_handle(const_cast<float*>(b));
    execute(fwd_, fwd_args_, "forward");
    dst_->reorder_out();
  }

  /// dx (type diff_src_type) <- dL/dx from dz (dL/d(pre-activation output),
  /// type compute). `call` names the backward call: backward_weights with
  /// the same dz and call shares dz's reorder.
  void backward_data(const void* dz, const float* w, void* dx, uint64_t call) {
    if (!bwd_data_) build_backward_data();
    bd_w_->user.set_data_handle(const_cast<float*>(w));
    bd_w_->reorder_in();
    bind_per_call(bd_scratch_, {&*bd_diff_src_});
    bd_dz_->get(dz, call);
    bd_diff_src_->user.set_data_handle(dx);
    execute(*bwd_data_, bd_args_, "backward-data");
    bd_diff_src_->reorder_out();
  }

  /// Makes dz = relu_backward(y, dy) (y and dy: the ReLU forward's output
  /// and its gradient, [N, Ho, Wo, Cout] NHWC fp32) straight in the layout
  /// the backward passes read it in, kept for `call`; the passes named
  /// (weights, data) then take dy as their dz with that call. Returns false,
  /// doing nothing, unless the problem is fp32 with a fused ReLU, y and dy
  /// are NHWC, and those passes share one dz in nChw16c (Winograd's layout).
  bool keep_relu_gradient(const float* y, const float* dy, uint64_t call, bool weights, bool data) {
    if (pb_.compute != dt::f32 || !pb_.relu || pb_.blocked_dst || pb_.dst[1] % 16 != 0 || !(weights || data))
      return false;
    if (weights && !bwd_w_) build_backward_weights();
    if (data && !bwd_data_) build_backward_data();
    KeptInput* dz = weights ? bw_dz_ : bd_dz_;
    if ((weights && data && bw_dz_ != bd_dz_) || dz->lib_desc() != md(pb_.dst, dt::f32, tag::aBcd16b)) return false;
    const Shape s{int(pb_.dst[0]), int(pb_.dst[2]), int(pb_.dst[3]), int(pb_.dst[1])};
    dz->put(dy, call, [&](float* out) { relu_gradient_to_nchw16c(y, dy, s, out); });
    return true;
  }

  /// dw (and db when the problem has a bias; both fp32) <- dL/dw from x and
  /// dz (compute type); forward_stamp is the op's last forward's (x's
  /// reorder reused when that forward ran here on x), call as in backward_data.
  void backward_weights(const void* x, const void* dz, float* dw, float* db, uint64_t forward_stamp, uint64_t call) {
    if (!bwd_w_) build_backward_weights();
    bind_per_call(bw_scratch_, {});
    bw_src_->get(x, forward_stamp);
    bw_dz_->get(dz, call);
    bw_w_->user.set_data_handle(dw);
    if (pb_.with_bias) bw_bias_.set_data_handle(db);
    execute(*bwd_w_, bw_args_, "backward-weights");
    bw_w_->reorder_out();
  }

 private:
  static tag activations(const ConvProblem& pb, bool backward_weights) {
    return library_activations(pb, backward_weights) ? tag::any : tag::nhwc;
  }
  /// The caller's layout of an activation (ConvProblem::blocked_src / blocked_dst).
  static tag user_tag(bool blocked) { return blocked ? tag::aBcd16b : tag::nhwc; }

  static typename Fwd::primitive_desc make_fwd_pd(const ConvProblem& pb) {
    const tag act = activations(pb, false);
    const md src(pb.src, pb.compute, act), dst(pb.dst, pb.dst_type, act);
    const md w(pb.weights, pb.compute, tag::any), b(pb.bias, dt::f32, tag::a);
    const auto prop = dnnl::prop_kind::forward_training;
    auto d = pb.with_bias ? typename Fwd::desc(prop, pb.algo, src, w, b, dst, pb.strides, pb.dilates, pb.pad_l, pb.pad_r)
                          : typename Fwd::desc(prop, pb.algo, src, w, dst, pb.strides, pb.dilates, pb.pad_l, pb.pad_r);
    dnnl::primitive_attr attr = user_scratchpad_attr();
    if (pb.relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      attr.set_post_ops(ops);
    }
    return typename Fwd::primitive_desc(d, attr, cpu_engine());
  }

  static typename BwdData::primitive_desc make_bwd_data_pd(const ConvProblem& pb,
                                                           const typename Fwd::primitive_desc& hint) {
    const tag act = activations(pb, false);
    const md diff_src(pb.src, pb.diff_src_type, act), diff_dst(pb.dst, pb.compute, act);
    const md w(pb.weights, pb.compute, tag::any);
    typename BwdData::desc d(pb.algo, diff_src, w, diff_dst, pb.strides, pb.dilates, pb.pad_l, pb.pad_r);
    return typename BwdData::primitive_desc(d, user_scratchpad_attr(), cpu_engine(), hint);
  }

  static typename BwdWeights::primitive_desc make_bwd_weights_pd(const ConvProblem& pb,
                                                                 const typename Fwd::primitive_desc& hint) {
    const tag act = activations(pb, true);
    const md src(pb.src, pb.compute, act), diff_dst(pb.dst, pb.compute, act);
    const md dw(pb.weights, dt::f32, tag::any), db(pb.bias, dt::f32, tag::a);
    auto d = pb.with_bias
                 ? typename BwdWeights::desc(pb.algo, src, dw, db, diff_dst, pb.strides, pb.dilates, pb.pad_l, pb.pad_r)
                 : typename BwdWeights::desc(pb.algo, src, dw, diff_dst, pb.strides, pb.dilates, pb.pad_l, pb.pad_r);
    return typename BwdWeights::primitive_desc(d, user_scratchpad_attr(), cpu_engine(), hint);
  }

  void build_backward_data() {
    try {
      const auto pd = make_bwd_data_pd(pb_, fwd_pd_);
      bwd_data_ = BwdData(pd);
      bd_w_.emplace(pb_.user_weights, pd.weights_desc(), true);
      bd_diff_src_.emplace(md(pb_.src, pb_.diff_src_type, user_tag(pb_.blocked_src)), pd.diff_src_desc(), false, true);
      bd_dz_ = kept(dz_, bd_dz_own_, md(pb_.dst, pb_.compute, user_tag(pb_.blocked_dst)), pd.diff_dst_desc());
      bd_scratch_ = dnnl::memory(pd.scratchpad_desc(), cpu_engine(), DNNL_MEMORY_NONE);
      bd_args_ = {{DNNL_ARG_DIFF_DST, bd_dz_->lib()}, {DNNL_ARG_WEIGHTS, bd_w_->lib},
                  {DNNL_ARG_DIFF_SRC, bd_diff_src_->lib}, {DNNL_ARG_SCRATCHPAD, bd_scratch_}};
    } catch (const dnnl::error& e) {
      throw_dnnl_setup_error("backward-data setup", e);
    }
  }

  void build_backward_weights() {
    try {
      auto& eng = cpu_engine();
      const auto pd = make_bwd_weights_pd(pb_, fwd_pd_);
      bwd_w_ = BwdWeights(pd);
      bw_w_.emplace(pb_.user_weights, pd.diff_weights_desc(), false);
      bw_src_ = kept(src_, bw_src_own_, md(pb_.src, pb_.compute, user_tag(pb_.blocked_src)), pd.src_desc());
      bw_dz_ = kept(dz_, bw_dz_own_, md(pb_.dst, pb_.compute, user_tag(pb_.blocked_dst)), pd.diff_dst_desc());
      bw_bias_ = dnnl::memory(md(pb_.bias, dt::f32, tag::a), eng, DNNL_MEMORY_NONE);
      bw_scratch_ = dnnl::memory(pd.scratchpad_desc(), eng, DNNL_MEMORY_NONE);
      bw_args_ = {{DNNL_ARG_SRC, bw_src_->lib()}, {DNNL_ARG_DIFF_DST, bw_dz_->lib()},
                  {DNNL_ARG_DIFF_WEIGHTS, bw_w_->lib}, {DNNL_ARG_SCRATCHPAD, bw_scratch_}};
      if (pb_.with_bias) bw_args_[DNNL_ARG_DIFF_BIAS] = bw_bias_;
    } catch (const dnnl::error& e) {
      throw_dnnl_setup_error("backward-weights setup", e);
    }
  }

  /// The kept input in layout lib: `shared` (created first) when its layout
  /// is lib, else `own`.
  static KeptInput* kept(std::optional<KeptInput>& shared, std::optional<KeptInput>& own, const md& user,
                         const md& lib) {
    if (!shared) return &shared.emplace(user, lib);
    if (shared->lib_desc() == lib) return &*shared;
    return &own.emplace(user, lib);
  }

  ConvProblem pb_;
  typename Fwd::primitive_desc fwd_pd_;
  Fwd fwd_;
  dnnl::memory bias_, fwd_scratch_;
  std::optional<MemoryPair> fwd_w_, dst_;
  /// The forward's input and the backward's dz in the passes' layouts, kept
  /// (see KeptInput) and shared by the passes whose layouts agree.
  std::optional<KeptInput> src_, bw_src_own_, dz_, bw_dz_own_, bd_dz_own_;
  KeptInput *bw_src_ = nullptr, *bw_dz_ = nullptr, *bd_dz_ = nullptr;
  std::unordered_map<int, dnnl::memory> fwd_args_;

  std::optional<BwdData> bwd_data_;
  std::optional<MemoryPair> bd_w_, bd_diff_src_;
  dnnl::memory bd_scratch_;
  std::unordered_map<int, dnnl::memory> bd_args_;

  std::optional<BwdWeights> bwd_w_;
  std::optional<MemoryPair> bw_w_;
  dnnl::memory bw_bias_, bw_scratch_;
  std::unordered_map<int, dnnl::memory> bw_args_;
};

}  // namespace trainer::cpu
