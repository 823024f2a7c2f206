// Conv2DOp on oneDNN: convolution_forward / backward_data / backward_weights
// with NHWC activations and the Keras kernel [kh, kw, in, out] (oneDNN tag hwio).
#include "backend/cpu/conv_primitives.h"
#include "backend/ops.h"

namespace trainer {

namespace {
using ConvPrims = cpu::ConvPrimitives<dnnl::convolution_forward, dnnl::convolution_backward_data,
                                      dnnl::convolution_backward_weights>;
}  // namespace

struct Conv2DOp::Impl {
  Conv2DParams p;
  cpu::PrimitiveCache<cpu::ConvKey, ConvPrims> cache;

  ConvPrims& get(Shape xs, Shape ys, bool with_bias) {
    return cache.get(cpu::ConvKey{xs, ys, with_bias}, [&] {
      dnnl::memory::desc user_w({ys.c, xs.c, p.kh, p.kw}, dnnl::memory::data_type::f32,
                                dnnl::memory::format_tag::hwio);
      auto pb = cpu::make_conv_problem(xs, ys, p, conv_padding(xs.h, ys.h, p.kh, p.stride_h),
                                       conv_padding(xs.w, ys.w, p.kw, p.stride_w), user_w,
                                       with_bias);
      return std::make_unique<ConvPrims>(pb, dnnl::algorithm::convolution_direct);
    });
  }
  /// Backward-data ignores the bias: reuse the forward's entry, whichever it is.
  ConvPrims& get_any_bias(Shape xs, Shape ys) {
    if (ConvPrims* c = cache.find(cpu::ConvKey{xs, ys, true})) return *c;
    return get(xs, ys, false);
  }
};

Conv2DOp::Conv2DOp(Conv2DParams p) : impl_(std::make_unique<Impl>()) { impl_->p = p; }
Conv2DOp::~Conv2DOp() = default;
Conv2DOp::Conv2DOp(Conv2DOp&&) noexcept = default;
Conv2DOp& Conv2DOp::operator=(Conv2DOp&&) noexcept = default;

void Conv2DOp::forward(const float* x, Shape xs, const float* kernel, const float* bias, float* y,
                       Shape ys) {
  impl_->get(xs, ys, bias != nullptr).forward(x, kernel, bias, y);
}

void Conv2DOp::backward_data(const float* dy, Shape ys, const float* kernel, float* dx, Shape xs) {
  impl_->get_any_bias(xs, ys).backward_data(dy, kernel, dx);
}

void Conv2DOp::backward_weights(const float* x, Shape xs, const float* dy, Shape ys, float* dkernel,
                                float* dbias) {
  impl_->get(xs, ys, dbias != nullptr).backward_weights(x, dy, dkernel, dbias);
}

}  // namespace trainer
