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

  void forward(ConstTensorView x, ConvWeights w, Activation act, TensorView y) override {
    if (x.shape.numel() == 0 || y.shape.numel() == 0) return;
    core_.backward_data(ConvInput{x.data, cudnn_type(x.dtype), x.shape, Staging::Keep}, w, act,
                        ConvOutput{y.data, cudnn_type(y.dtype), y.shape});
    core_.forget(ConvSide::A);  // the last step's gradient is not this one's
  }

  /// dz = dy * act'(y) made once in cuDNN's type with dbias on the way
  /// (ConvCore::prepare_gradient on side A, y's), then the filter and data
  /// gradients from it.
  void backward(const ConvBackwardArgs& a) override {
    const Shape xs = a.x.shape, ys = a.y.shape;
    float *dkernel = a.dkernel, *dbias = a.dbias;
    if (xs.numel() == 0 || ys.numel() == 0) {
      if (dkernel) ctx_.zero(dkernel, size_t(p_.kh) * p_.kw * ys.c * xs.c * sizeof(float));
      if (dbias) ctx_.zero(dbias, size_t(ys.c) * sizeof(float));
      return;
    }
    const cudnnDataType_t xtype = cudnn_type(a.x.dtype), ytype = cudnn_type(a.y.dtype);
    core_.prepare_gradient(ConvSide::A, ys, xs, a.act, a.y.data, a.dy, ytype, dbias);
    const ConvInput dz{nullptr, ytype, ys, Staging::Prepared};
    if (dkernel)  // nullptr: a frozen layer
      core_.backward_filter(dz, ConvInput{a.x.data, xtype, xs, Staging::Reuse}, dkernel);
    if (a.dx) core_.forward(dz, ConvWeights{a.kernel, nullptr}, Activation{}, ConvOutput{a.dx, xtype, xs});
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
