// Conv2DOp's CPU backend on oneDNN: convolution_forward / backward_data /
// backward_weights with NHWC activations and the Keras kernel [kh, kw, in, out]
// (oneDNN tag hwio; with groups, [kh, kw, in / groups, out] as oneDNN's grouped
// weights {g, out / g, in / g, kh, kw} in tag hwigo).
#include "backend/cpu/cached_conv_op.h"
#include "backend/device_ops.h"

namespace trainer::cpu {

namespace {

using ConvOp = CachedConvOp<
    ConvPrimitives<dnnl::convolution_forward, dnnl::convolution_backward_data, dnnl::convolution_backward_weights>>;

/// Padding of the input (x -> y); the kernel [kh, kw, in, out] is oneDNN's
/// hwio, a grouped one [kh, kw, in / g, out] its hwigo (out = g x out / g, group major).
ConvProblem conv_problem(Shape xs, Shape ys, const Conv2DParams& p, bool with_bias) {
  const int g = p.groups;
  const dnnl::memory::desc user_w =
      g == 1 ? dnnl::memory::desc({ys.c, xs.c, p.kh, p.kw}, dnnl::memory::data_type::f32,
                                  dnnl::memory::format_tag::hwio)
             : dnnl::memory::desc({g, ys.c / g, xs.c / g, p.kh, p.kw}, dnnl::memory::data_type::f32,
                                  dnnl::memory::format_tag::hwigo);
  ConvProblem pb = make_conv_problem(xs, ys, p, conv_padding(xs.h, ys.h, p.span_h(), p.stride_h),
                                     conv_padding(xs.w, ys.w, p.span_w(), p.stride_w), user_w, with_bias);
  if (g > 1) pb.weights = {g, ys.c / g, xs.c / g, p.kh, p.kw};
  return pb;
}

}  // namespace

std::unique_ptr<ConvBackend> make_conv2d(const Device& d, Conv2DParams p) {
  return std::make_unique<ConvOp>(p, dnnl::algorithm::convolution_direct, conv_problem,
                                  d.precision == Precision::BF16);
}

}  // namespace trainer::cpu
