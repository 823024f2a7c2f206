// Conv2DOp on oneDNN: convolution_forward / backward_data / backward_weights
// with NHWC activations and the Keras kernel [kh, kw, in, out] (oneDNN tag hwio).
#include "backend/cpu/conv_primitives.h"
#include "backend/ops.h"

namespace trainer {

namespace {

using ConvOp = cpu::CachedConvOp<dnnl::convolution_forward, dnnl::convolution_backward_data,
                                 dnnl::convolution_backward_weights>;

/// Padding of the input (x -> y); the kernel [kh, kw, in, out] is oneDNN's hwio.
cpu::ConvProblem conv_problem(Shape xs, Shape ys, const Conv2DParams& p, bool with_bias) {
  dnnl::memory::desc user_w({ys.c, xs.c, p.kh, p.kw}, dnnl::memory::data_type::f32,
                            dnnl::memory::format_tag::hwio);
  return cpu::make_conv_problem(xs, ys, p, conv_padding(xs.h, ys.h, p.kh, p.stride_h),
                                conv_padding(xs.w, ys.w, p.kw, p.stride_w), user_w, with_bias);
}

}  // namespace

struct Conv2DOp::Impl : ConvOp {
  explicit Impl(Conv2DParams p) : ConvOp(p, dnnl::algorithm::convolution_direct, conv_problem) {}
};

Conv2DOp::Conv2DOp(Conv2DParams p) : impl_(std::make_unique<Impl>(p)) {}
Conv2DOp::~Conv2DOp() = default;
Conv2DOp::Conv2DOp(Conv2DOp&&) noexcept = default;
Conv2DOp& Conv2DOp::operator=(Conv2DOp&&) noexcept = default;

void Conv2DOp::forward(const float* x, Shape xs, const float* kernel, const float* bias, float* y,
                       Shape ys) {
  impl_->forward(x, xs, kernel, bias, y, ys);
}

void Conv2DOp::backward_data(const float* dy, Shape ys, const float* kernel, float* dx, Shape xs) {
  impl_->backward_data(dy, ys, kernel, dx, xs);
}

void Conv2DOp::backward_weights(const float* x, Shape xs, const float* dy, Shape ys, float* dkernel,
                                float* dbias) {
  impl_->backward_weights(x, xs, dy, ys, dkernel, dbias);
}

}  // namespace trainer
