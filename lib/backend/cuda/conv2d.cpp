// cuda::make_conv2d: Conv2D on cuDNN through ConvCore with a = x, b = y and the
// Keras kernel [kh, kw, Cin / groups, Cout] (see cudnn_conv.h for layouts, padding,
// precision and algorithms).
#include "backend/cuda/cudnn_conv.h"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// Conv2D's ConvBackend, on x and y of either type (ConvCore converts where
/// cuDNN's type differs). forward() keeps x's converted / padded copy for
/// backward(), which must get the same x pointer with the data unchanged (as
/// the layers guarantee: backward sees the forward's tensors; another pointer
/// or shape makes a new copy). backward() makes dz once
/// (ConvCore::prepare_gradient) for both gradient convolutions. Empty
/// batches (N = 0) queue no convolution; backward() then zeroes the
/// parameter gradients.
class CudnnConv2D final : public ConvBackend {
 public:
  CudnnConv2D(const Device& d, Conv2DParams p) : ctx_(context(d)), p_(p), core_(d, p) {}

  void forward(DType xt, const void* x, Shape xs, const float* kernel, const float* bias, Activation act, DType yt,
               void* y, Shape ys) override {
    if (xs.numel() == 0 || ys.numel() == 0) return;
    core_.forward(x, cudnn_type(xt), xs, Staging::Keep, kernel, bias, act, y, cudnn_type(yt), ys);
    core_.forget(ConvSide::B);  // the last step's gradient is not this one's
  }

  /// dz = dy * act'(y) made once in cuDNN's type with dbias on the way
  /// (ConvCore::prepare_gradient), then the filter and data gradients from it.
  void backward(Activation act, DType yt, const void* y, const void* dy, Shape ys, DType xt, const void* x, Shape xs,
                const float* kernel, float* dkernel, float* dbias, void* dx) override {
    if (xs.numel() == 0 || ys.numel() == 0) {
      if (dkernel) ctx_.zero(dkernel, size_t(p_.kh) * p_.kw * (xs.c / p_.groups) * ys.c * sizeof(float));
      if (dbias) ctx_.zero(dbias, size_t(ys.c) * sizeof(float));
      return;
    }
    const cudnnDataType_t xtype = cudnn_type(xt), ytype = cudnn_type(yt);
    core_.prepare_gradient(ConvSide::B, xs, ys, act, y, dy, ytype, dbias);
    if (dkernel)  // nullptr: a frozen layer
      core_.backward_filter(x, xtype, xs, Staging::Reuse, nullptr, ytype, ys, Staging::Prepared, dkernel);
    if (dx)
      core_.backward_data(nullptr, ytype, ys, Staging::Prepared, kernel, nullptr, Activation{}, dx, xtype, xs);
    core_.release_prepared(ConvSide::B);
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
