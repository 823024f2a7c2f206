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

  void forward(ConstTensorView x, ConvWeights w, Activation act, TensorView y) override {
    if (x.shape.numel() == 0 || y.shape.numel() == 0) return;
    core_.forward(ConvInput{x.data, cudnn_type(x.dtype), x.shape, Staging::Keep}, w, act,
                  ConvOutput{y.data, cudnn_type(y.dtype), y.shape});
    core_.forget(ConvSide::B);  // the last step's gradient is not this one's
  }

  /// dz = dy * act'(y) made once in cuDNN's type with dbias on the way
  /// (ConvCore::prepare_gradient), then the filter and data gradients from it.
  void backward(const ConvBackwardArgs& a) override {
    const Shape xs = a.x.shape, ys = a.y.shape;
    float *dkernel = a.dkernel, *dbias = a.dbias;
    if (xs.numel() == 0 || ys.numel() == 0) {
      if (dkernel) ctx_.zero(dkernel, size_t(p_.kh) * p_.kw * (xs.c / p_.groups) * ys.c * sizeof(float));
      if (dbias) ctx_.zero(dbias, size_t(ys.c) * sizeof(float));
      return;
    }
    const cudnnDataType_t xtype = cudnn_type(a.x.dtype), ytype = cudnn_type(a.y.dtype);
    core_.prepare_gradient(ConvSide::B, xs, ys, a.act, a.y.data, a.dy, ytype, dbias);
    const ConvInput dz{nullptr, ytype, ys, Staging::Prepared};
    if (dkernel)  // nullptr: a frozen layer
      core_.backward_filter(ConvInput{a.x.data, xtype, xs, Staging::Reuse}, dz, dkernel);
    if (a.dx) core_.backward_data(dz, ConvWeights{a.kernel, nullptr}, Activation{}, ConvOutput{a.dx, xtype, xs});
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
