// Conv2DTransposeOp on oneDNN: deconvolution_forward / backward_data / backward_weights
// with NHWC activations and the Keras kernel [kh, kw, out, in].
#include "backend/cpu/conv_primitives.h"
#include "backend/ops.h"

namespace trainer {

namespace {

using ConvOp = cpu::CachedConvOp<dnnl::deconvolution_forward, dnnl::deconvolution_backward_data,
                                 dnnl::deconvolution_backward_weights>;

/// Padding of the convolution this one transposes (y -> x); the Keras kernel
/// [kh, kw, out, in] as strides over oneDNN's {out, in, kh, kw}.
cpu::ConvProblem deconv_problem(Shape xs, Shape ys, const Conv2DParams& p, bool with_bias) {
  const dnnl::memory::dim out = ys.c, in = xs.c;
  dnnl::memory::desc user_w({out, in, p.kh, p.kw}, dnnl::memory::data_type::f32,
                            dnnl::memory::dims{in, 1, p.kw * out * in, out * in});
  return cpu::make_conv_problem(xs, ys, p, conv_padding(ys.h, xs.h, p.kh, p.stride_h),
                                conv_padding(ys.w, xs.w, p.kw, p.stride_w), user_w, with_bias);
}

}  // namespace

struct Conv2DTransposeOp::Impl : ConvOp {
  explicit Impl(Conv2DParams p)
      : ConvOp(p, dnnl::algorithm::deconvolution_direct, deconv_problem) {}
};

Conv2DTransposeOp::Conv2DTransposeOp(Conv2DParams p) : impl_(std::make_unique<Impl>(p)) {}
Conv2DTransposeOp::~Conv2DTransposeOp() = default;
Conv2DTransposeOp::Conv2DTransposeOp(Conv2DTransposeOp&&) noexcept = default;
Conv2DTransposeOp& Conv2DTransposeOp::operator=(Conv2DTransposeOp&&) noexcept = default;

void Conv2DTransposeOp::forward(const float* x, Shape xs, const float* kernel, const float* bias,
                                float* y, Shape ys) {
  impl_->forward(x, xs, kernel, bias, y, ys);
}

void Conv2DTransposeOp::backward_data(const float* dy, Shape ys, const float* kernel, float* dx, Shape xs) {
  impl_->backward_data(dy, ys, kernel, dx, xs);
}

void Conv2DTransposeOp::backward_weights(const float* x, Shape xs, const float* dy, Shape ys,
                                         float* dkernel, float* dbias) {
  impl_->backward_weights(x, xs, dy, ys, dkernel, dbias);
}

}  // namespace trainer
