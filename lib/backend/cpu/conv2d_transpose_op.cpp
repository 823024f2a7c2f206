// Conv2DTransposeOp on oneDNN: deconvolution_forward / backward_data / backward_weights
// with NHWC activations and the Keras kernel [kh, kw, in, out] (oneDNN tag hwio).
#include "backend/cpu/conv_primitives.h"
#include "backend/ops.h"

namespace trainer {

namespace {
using ConvPrims = cpu::ConvPrimitives<dnnl::deconvolution_forward, dnnl::deconvolution_backward_data,
                                      dnnl::deconvolution_backward_weights>;
}  // namespace

struct Conv2DTransposeOp::Impl {
  Conv2DParams p;
  cpu::PrimitiveCache<cpu::ConvKey, ConvPrims> cache;

  ConvPrims& get(Shape xs, Shape ys, bool with_bias) {
    return cache.get(cpu::ConvKey{xs, ys, with_bias}, [&] {
      const dnnl::memory::dim out = ys.c, in = xs.c;
      dnnl::memory::desc user_w({out, in, p.kh, p.kw}, dnnl::memory::data_type::f32,
                                dnnl::memory::dims{in, 1, p.kw * out * in, out * in});
      auto pb = cpu::make_conv_problem(xs, ys, p, conv_padding(ys.h, xs.h, p.kh, p.stride_h),
                                       conv_padding(ys.w, xs.w, p.kw, p.stride_w), user_w,
                                       with_bias);
      return std::make_unique<ConvPrims>(pb, dnnl::algorithm::deconvolution_direct);
    });
  }
  /// Backward-data ignores the bias: reuse the forward's entry, whichever it is.
  ConvPrims& get_any_bias(Shape xs, Shape ys) {
    if (ConvPrims* c = cache.find(cpu::ConvKey{xs, ys, true})) return *c;
    return get(xs, ys, false);
  }
};

Conv2DTransposeOp::Conv2DTransposeOp(Conv2DParams p) : impl_(std::make_unique<Impl>()) { impl_->p = p; }
Conv2DTransposeOp::~Conv2DTransposeOp() = default;
Conv2DTransposeOp::Conv2DTransposeOp(Conv2DTransposeOp&&) noexcept = default;
Conv2DTransposeOp& Conv2DTransposeOp::operator=(Conv2DTransposeOp&&) noexcept = default;

void Conv2DTransposeOp::forward(const float* x, Shape xs, const float* kernel, const float* bias, float* y,
                       Shape ys) {
  impl_->get(xs, ys, bias != nullptr).forward(x, kernel, bias, y);
}

void Conv2DTransposeOp::backward_data(const float* dy, Shape ys, const float* kernel, float* dx, Shape xs) {
  impl_->get_any_bias(xs, ys).backward_data(dy, kernel, dx);
}

void Conv2DTransposeOp::backward_weights(const float* x, Shape xs, const float* dy, Shape ys, float* dkernel,
                                float* dbias) {
  impl_->get(xs, ys, dbias != nullptr).backward_weights(x, dy, dkernel, dbias);
}

}  // namespace trainer
