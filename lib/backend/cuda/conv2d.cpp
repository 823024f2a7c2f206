// cuda::make_conv2d: Conv2D on cuDNN through ConvCore with a = x, b = y and the
// Keras kernel [kh, kw, Cin, Cout] (see cudnn_conv.h for layouts, padding,
// precision and algorithms).
#include "backend/cuda/conv_epilogue.h"
#include "backend/cuda/cudnn_conv.h"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// Conv2D's ConvBackend. x's bf16 / padded copy made in forward() is kept for
/// the backward calls, which must get the same x pointer with the data
/// unchanged (as the layers guarantee: backward sees the forward's tensors);
/// another pointer or shape makes a new copy. Likewise dy's bf16 copy is made
/// once after each forward(), by the first of backward_data and
/// backward_weights, and reused by the other. Empty batches (N = 0) queue
/// nothing, and the backward calls then zero the parameter gradients.
class CudnnConv2D final : public ConvBackend {
 public:
  CudnnConv2D(const Device& d, Conv2DParams p) : ctx_(context(d)), p_(p), core_(d, p) {}

  void forward(const float* x, Shape xs, const float* kernel, const float* bias, Activation act, float* y,
               Shape ys) override {
    if (xs.numel() == 0 || ys.numel() == 0) return;
    core_.forward(x, xs, Staging::Keep, kernel, bias, act, y, ys);
    core_.forget(ConvSide::B);  // dy of this step is staged once by whichever backward call comes first
  }

  void backward_data(const float* dy, Shape ys, const float* kernel, float* dx, Shape xs) override {
    if (xs.numel() == 0 || ys.numel() == 0) return;
    core_.backward_data(dy, ys, Staging::Reuse, kernel, nullptr, Activation::Linear, dx, xs);
  }

  void backward_weights(const float* x, Shape xs, const float* dy, Shape ys, float* dkernel, float* dbias) override {
    if (xs.numel() == 0 || ys.numel() == 0) {
      ctx_.zero(dkernel, size_t(p_.kh) * p_.kw * xs.c * ys.c * sizeof(float));
      if (dbias) ctx_.zero(dbias, size_t(ys.c) * sizeof(float));
      return;
    }
    core_.backward_filter(x, xs, Staging::Reuse, dy, ys, Staging::Reuse, dkernel);
    if (dbias) bias_gradient(ctx_, dy, (long long)ys.n * ys.h * ys.w, ys.c, dbias);
  }

  /// dz = dy * act'(y) made once in cuDNN's type with dbias on the way
  /// (ConvCore::prepare_gradient), then the filter and data gradients from it.
  void backward(Activation act, const float* y, const float* dy, Shape ys, const float* x, Shape xs,
                const float* kernel, float* dkernel, float* dbias, float* dx) override {
    if (xs.numel() == 0 || ys.numel() == 0) {
      backward_weights(x, xs, dy, ys, dkernel, dbias);
      return;
    }
    core_.prepare_gradient(ConvSide::B, xs, ys, act, y, dy, dbias);
    core_.backward_filter(x, xs, Staging::Reuse, nullptr, ys, Staging::Prepared, dkernel);
    if (dx) core_.backward_data(nullptr, ys, Staging::Prepared, kernel, nullptr, Activation::Linear, dx, xs);
  }

 private:
  CudaContext& ctx_;
  Conv2DParams p_;
  ConvCore core_;
};

}  // namespace

std::unique_ptr<ConvBackend> make_conv2d(const Device& d, Conv2DParams p) {
  return std::make_unique<CudnnConv2D>(d, p);
}

}  // namespace trainer::cuda
