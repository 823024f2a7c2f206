// cuda::make_conv2d_transpose: Conv2DTranspose on cuDNN. TensorFlow's
// conv2d_transpose is the input gradient of a Conv2D, so this runs ConvCore's
// convolution with a = y (the larger side), b = x and the Keras kernel
// [kh, kw, Cout, Cin] as ConvCore's [kh, kw, Ca, Cb]: forward is cuDNN's
// backward-data, backward-data is cuDNN's forward, and the kernel gradient is
// cuDNN's backward-filter with dy in the role of the input and x in the role
// of the output gradient. See cudnn_conv.h for layouts, padding, precision and
// algorithms.
#include "backend/cuda/cudnn_conv.h"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// Conv2DTranspose's ConvBackend, on x and y of either type (ConvCore
/// converts where cuDNN's type differs). forward() keeps x's converted copy for
/// backward(), which must get the same x pointer with the data unchanged (as
/// the layers guarantee; another pointer or shape makes a new copy).
/// backward() makes dz (on y's side, ConvCore's A) once for both gradient
/// convolutions. Empty batches (N = 0) queue no convolution; backward() then
/// zeroes the parameter gradients.
class CudnnConv2DTranspose final : public ConvBackend {
 public:
  CudnnConv2DTranspose(const Device& d, Conv2DParams p) : ctx_(context(d)), p_(p), core_(d, p) {}

  void forward(DType xt, const void* x, Shape xs, const float* kernel, const float* bias, Activation act, DType yt,
               void* y, Shape ys) override {
    if (xs.numel() == 0 || ys.numel() == 0) return;
    core_.backward_data(x, cudnn_type(xt), xs, Staging::Keep, kernel, bias, act, y, cudnn_type(yt), ys);
    core_.forget(ConvSide::A);  // the last step's gradient is not this one's
  }

  /// dz = dy * act'(y) made once in cuDNN's type with dbias on the way
  /// (ConvCore::prepare_gradient on side A, y's), then the filter and data
  /// gradients from it.
  void backward(Activation act, DType yt, const void* y, const void* dy, Shape ys, DType xt, const void* x, Shape xs,
                const float* kernel, float* dkernel, float* dbias, void* dx) override {
    if (xs.numel() == 0 || ys.numel() == 0) {
      if (dkernel) ctx_.zero(dkernel, size_t(p_.kh) * p_.kw * ys.c * xs.c * sizeof(float));
      if (dbias) ctx_.zero(dbias, size_t(ys.c) * sizeof(float));
      return;
    }
    const cudnnDataType_t xtype = cudnn_type(xt), ytype = cudnn_type(yt);
    core_.prepare_gradient(ConvSide::A, ys, xs, act, y, dy, ytype, dbias);
    if (dkernel)  // nullptr: a frozen layer
      core_.backward_filter(nullptr, ytype, ys, Staging::Prepared, x, xtype, xs, Staging::Reuse, dkernel);
    if (dx) core_.forward(nullptr, ytype, ys, Staging::Prepared, kernel, nullptr, Activation{}, dx, xtype, xs);
    core_.release_prepared(ConvSide::A);
  }

 private:
  CudaContext& ctx_;
  Conv2DParams p_;
  ConvCore core_;
};

}  // namespace

std::unique_ptr<ConvBackend> make_conv2d_transpose(const Device& d, Conv2DParams p) {
  return std::make_unique<CudnnConv2DTranspose>(d, p);
}

}  // namespace trainer::cuda
