// Conv2DTransposeOp's CPU backend on oneDNN: deconvolution_forward /
// backward_data / backward_weights with NHWC activations and the Keras kernel
// [kh, kw, out, in]; one whose kernel equals its strides as inner products
// (patch_deconv_primitives.h).
#include "backend/cpu/cached_conv_op.h"
#include "backend/cpu/patch_deconv_primitives.h"
#include "backend/device_ops.h"

namespace trainer::cpu {

namespace {

using DeconvOp = CachedConvOp<ConvPrimitives<dnnl::deconvolution_forward, dnnl::deconvolution_backward_data,
                                             dnnl::deconvolution_backward_weights>>;
using PatchDeconvOp = CachedConvOp<PatchDeconvPrimitives>;

/// Padding of the convolution this one transposes (y -> x); the Keras kernel
/// [kh, kw, out, in] as strides over oneDNN's {out, in, kh, kw}.
ConvProblem deconv_problem(Shape xs, Shape ys, const Conv2DParams& p, bool with_bias) {
  const dnnl::memory::dim out = ys.c, in = xs.c;
  dnnl::memory::desc user_w({out, in, p.kh, p.kw}, dnnl::memory::data_type::f32,
                            dnnl::memory::dims{in, 1, p.kw * out * in, out * in});
  return make_conv_problem(xs, ys, p, conv_padding(ys.h, xs.h, p.span_h(), p.stride_h),
                           conv_padding(ys.w, xs.w, p.span_w(), p.stride_w), user_w, with_bias);
}

}  // namespace

std::unique_ptr<ConvBackend> make_conv2d_transpose(const Device& d, Conv2DParams p) {
  const bool bf16 = d.precision == Precision::BF16;
  if (patch_deconv(p)) return std::make_unique<PatchDeconvOp>(p, dnnl::algorithm::deconvolution_direct, deconv_problem, bf16);
  return std::make_unique<DeconvOp>(p, dnnl::algorithm::deconvolution_direct, deconv_problem, bf16);
}

}  // namespace trainer::cpu
