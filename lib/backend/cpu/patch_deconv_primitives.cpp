#include "backend/cpu/patch_deconv_primitives.h"

#include <algorithm>

#include "core/error.h"

namespace trainer::cpu {

namespace {

/// A 2-D memory {rows, cols} of type t, row-major, on no buffer yet.
dnnl::memory matrix(dnnl::memory::dim rows, dnnl::memory::dim cols, dnnl::memory::data_type t) {
  return dnnl::memory(dnnl::memory::desc({rows, cols}, t, dnnl::memory::format_tag::ab), cpu_engine(),
                      DNNL_MEMORY_NONE);
}

}  // namespace

PatchDeconvPrimitives::Geometry PatchDeconvPrimitives::geometry(const ConvProblem& pb) {
  const auto n = pb.src[0], cin = pb.src[1], h = pb.src[2], w = pb.src[3];
  const auto cout = pb.dst[1], kh = pb.weights[2], kw = pb.weights[3];
  Geometry g;
  g.m = n * h * w, g.cin = cin, g.k = kh * kw * cout, g.cout = cout;
  g.view = {n, h, kh, w, kw, cout};
  g.t_strides = {h * w * g.k, w * g.k, kw * cout, g.k, cout, 1};
  g.y_strides = {h * kh * w * kw * cout, kh * w * kw * cout, w * kw * cout, kw * cout, cout, 1};
  return g;
}

dnnl::inner_product_forward::primitive_desc PatchDeconvPrimitives::make_fwd_pd(const ConvProblem& pb) {
  const Geometry g = geometry(pb);
  const md src({g.m, g.cin}, pb.compute, tag::ab), w({g.k, g.cin}, pb.compute, tag::any);
  const md b({g.k}, dt::f32, tag::a), dst({g.m, g.k}, pb.dst_type, tag::ab);
  dnnl::primitive_attr attr = user_scratchpad_attr();
  if (pb.relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  const auto prop = dnnl::prop_kind::forward_training;
  return {pb.with_bias ? dnnl::inner_product_forward::desc(prop, src, w, b, dst)
                       : dnnl::inner_product_forward::desc(prop, src, w, dst),
          attr, cpu_engine()};
}

dnnl::inner_product_backward_data::primitive_desc PatchDeconvPrimitives::make_bwd_data_pd(
    const ConvProblem& pb, const dnnl::inner_product_forward::primitive_desc& hint) {
  const Geometry g = geometry(pb);
  const md diff_src({g.m, g.cin}, pb.diff_src_type, tag::ab), w({g.k, g.cin}, pb.compute, tag::any);
  const md diff_dst({g.m, g.k}, pb.compute, tag::ab);
  return {dnnl::inner_product_backward_data::desc(diff_src, w, diff_dst), user_scratchpad_attr(), cpu_engine(),
          hint};
}

dnnl::inner_product_backward_weights::primitive_desc PatchDeconvPrimitives::make_bwd_weights_pd(
    const ConvProblem& pb, const dnnl::inner_product_forward::primitive_desc& hint) {
  const Geometry g = geometry(pb);
  const md src({g.m, g.cin}, pb.compute, tag::ab), dw({g.k, g.cin}, dt::f32, tag::any);
  const md db({g.k}, dt::f32, tag::a), diff_dst({g.m, g.k}, pb.compute, tag::ab);
  return {pb.with_bias ? dnnl::inner_product_backward_weights::desc(src, dw, db, diff_dst)
                       : dnnl::inner_product_backward_weights::desc(src, dw, diff_dst),
          user_scratchpad_attr(), cpu_engine(), hint};
}

bool PatchDeconvPrimitives::fast_kernels(const ConvProblem& pb) {
  return fast_passes(pb, make_fwd_pd, make_bwd_data_pd, make_bwd_weights_pd);
}

PatchDeconvPrimitives::PatchDeconvPrimitives(const ConvProblem& pb) : pb_(pb), g_(geometry(pb)) {
  const dnnl::memory::dims want{pb.src[0], g_.cout, pb.src[2] * pb.weights[2], pb.src[3] * pb.weights[3]};
  if (pb.dst != want || pb.weights.size() != 4)
    throw InternalError("a patch transposed convolution whose output is not its input times its kernel");
  if (pb.blocked_src || pb.blocked_dst) throw InternalError("a patch transposed convolution on blocked activations");
  try {
    auto& eng = cpu_engine();
    fwd_pd_ = make_fwd_pd(pb);
    fwd_ = dnnl::inner_product_forward(fwd_pd_);
    const md user_w({g_.k, g_.cin}, dt::f32, tag::ab);  // the Keras kernel [kh, kw, Cout, Cin]
    fwd_w_.emplace(user_w, fwd_pd_.weights_desc(), true);
    t_to_y_.emplace(md(g_.view, pb.dst_type, g_.y_strides), md(g_.view, pb.dst_type, g_.t_strides), false, true);
    src_ = matrix(g_.m, g_.cin, pb.compute);
    bias_ = dnnl::memory(md({g_.k}, dt::f32, tag::a), eng, DNNL_MEMORY_NONE);
    fwd_scratch_ = dnnl::memory(fwd_pd_.scratchpad_desc(), eng, DNNL_MEMORY_NONE);
    tiled_bias_.resize(g_.k);
    fwd_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, fwd_w_->lib},
                 {DNNL_ARG_DST, matrix(g_.m, g_.k, pb.dst_type)}, {DNNL_ARG_SCRATCHPAD, fwd_scratch_}};
    if (pb.with_bias) fwd_args_[DNNL_ARG_BIAS] = bias_;
    dt_.emplace(md(g_.view, pb.compute, g_.y_strides), md(g_.view, pb.compute, g_.t_strides));
  } catch (const dnnl::error& e) {
    throw_dnnl_setup_error("patch transposed convolution setup", e);
  }
}

void PatchDeconvPrimitives::forward(const void* x, const float* w, const float* b, void* y, uint64_t) {
  fwd_w_->user.set_data_handle(const_cast<float*>(w));
  fwd_w_->reorder_in();
  bind_per_call(fwd_scratch_, {&*t_to_y_});
  t_to_y_->user.set_data_handle(y);  // first: where the two layouts agree (kh = 1 or W = 1), T is y itself
  fwd_args_[DNNL_ARG_DST].set_data_handle(t_to_y_->lib.get_data_handle());
  src_.set_data_handle(const_cast<void*>(x));
  if (pb_.with_bias) {
    for (dnnl::memory::dim k = 0; k < g_.k; ++k) tiled_bias_[k] = b[k % g_.cout];
    bias_.set_data_handle(tiled_bias_.data());
  }
  execute(fwd_, fwd_args_, "patch transposed convolution forward");
  t_to_y_->reorder_out();
}

void PatchDeconvPrimitives::backward_data(const void* dz, const float* w, void* dx, uint64_t call) {
  if (!bwd_data_) build_backward_data();
  bd_w_->user.set_data_handle(const_cast<float*>(w));
  bd_w_->reorder_in();
  bind_per_call(bd_scratch_, {});
  bd_args_[DNNL_ARG_DIFF_DST].set_data_handle(dt_->get(dz, call).get_data_handle());
  bd_diff_src_.set_data_handle(dx);
  execute(*bwd_data_, bd_args_, "patch transposed convolution backward-data");
}

void PatchDeconvPrimitives::backward_weights(const void* x, const void* dz, float* dw, float* db, uint64_t,
                                             uint64_t call) {
  if (!bwd_w_) build_backward_weights();
  bind_per_call(bw_scratch_, {});
  bw_args_[DNNL_ARG_DIFF_DST].set_data_handle(dt_->get(dz, call).get_data_handle());
  bw_src_.set_data_handle(const_cast<void*>(x));
  bw_w_->user.set_data_handle(dw);
  execute(*bwd_w_, bw_args_, "patch transposed convolution backward-weights");
  bw_w_->reorder_out();
  if (!pb_.with_bias) return;
  std::fill(db, db + g_.cout, 0.f);
  for (dnnl::memory::dim k = 0; k < g_.k; ++k) db[k % g_.cout] += tap_dbias_[k];
}

void PatchDeconvPrimitives::build_backward_data() {
  try {
    const auto pd = make_bwd_data_pd(pb_, fwd_pd_);
    bwd_data_ = dnnl::inner_product_backward_data(pd);
    bd_w_.emplace(md({g_.k, g_.cin}, dt::f32, tag::ab), pd.weights_desc(), true);
    bd_diff_src_ = matrix(g_.m, g_.cin, pb_.diff_src_type);
    bd_scratch_ = dnnl::memory(pd.scratchpad_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    bd_args_ = {{DNNL_ARG_DIFF_DST, matrix(g_.m, g_.k, pb_.compute)}, {DNNL_ARG_WEIGHTS, bd_w_->lib},
                {DNNL_ARG_DIFF_SRC, bd_diff_src_}, {DNNL_ARG_SCRATCHPAD, bd_scratch_}};
  } catch (const dnnl::error& e) {
    throw_dnnl_setup_error("patch transposed convolution backward-data setup", e);
  }
}

void PatchDeconvPrimitives::build_backward_weights() {
  try {
    const auto pd = make_bwd_weights_pd(pb_, fwd_pd_);
    bwd_w_ = dnnl::inner_product_backward_weights(pd);
    bw_w_.emplace(md({g_.k, g_.cin}, dt::f32, tag::ab), pd.diff_weights_desc(), false);
    bw_src_ = matrix(g_.m, g_.cin, pb_.compute);
    tap_dbias_.resize(g_.k);
    bw_bias_ = dnnl::memory(md({g_.k}, dt::f32, tag::a), cpu_engine(), tap_dbias_.data());
    bw_scratch_ = dnnl::memory(pd.scratchpad_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    bw_args_ = {{DNNL_ARG_SRC, bw_src_}, {DNNL_ARG_DIFF_DST, matrix(g_.m, g_.k, pb_.compute)},
                {DNNL_ARG_DIFF_WEIGHTS, bw_w_->lib}, {DNNL_ARG_SCRATCHPAD, bw_scratch_}};
    if (pb_.with_bias) bw_args_[DNNL_ARG_DIFF_BIAS] = bw_bias_;
  } catch (const dnnl::error& e) {
    throw_dnnl_setup_error("patch transposed convolution backward-weights setup", e);
  }
}

}  // namespace trainer::cpu
