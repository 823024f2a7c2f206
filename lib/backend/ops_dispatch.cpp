// Conv2DOp, Conv2DTransposeOp, MaxPool2DOp and BatchNormOp (backend/ops.h,
// backend/elementwise_ops.h): each makes its implementation on its first call,
// for that call's device (cpu::make_* or cuda::make_*), and forwards every
// call to it.
#include "backend/dispatch.h"

namespace trainer {

namespace {

std::unique_ptr<ConvBackend> make_conv2d(const Device& d, Conv2DParams p) { TRAINER_DISPATCH(d, make_conv2d(d, p)); }
std::unique_ptr<ConvBackend> make_conv2d_transpose(const Device& d, Conv2DParams p) {
  TRAINER_DISPATCH(d, make_conv2d_transpose(d, p));
}
std::unique_ptr<PoolBackend> make_max_pool2d(const Device& d, Pool2DParams p) {
  TRAINER_DISPATCH(d, make_max_pool2d(d, p));
}
std::unique_ptr<BatchNormBackend> make_batch_norm(const Device& d) { TRAINER_DISPATCH(d, make_batch_norm(d)); }

/// A convolution backward's checks: InternalError unless act's gradient is a
/// function of the output y, the only thing a convolution's backward reads
/// (activation_needs_input: the layers apply those kinds themselves), and
/// unless dbias comes with dkernel (a frozen layer gives neither). Returns
/// whether the call asks for anything (dkernel or dx).
bool backward_wanted(const ConvBackwardArgs& a, const char* call) {
  if (activation_needs_input(a.act.kind))
    throw InternalError(std::string(call) + ": an activation whose gradient needs its input");
  if (a.dbias && !a.dkernel) throw InternalError(std::string(call) + ": a bias gradient without the kernel's");
  return a.dkernel || a.dx;
}

/// InternalError when a GPU convolution gets an activation in
/// Layout::Blocked16, which only the CPU's take (Conv2DOp::takes_blocked).
void require_nhwc_on_gpu(const Device& d, ConstTensorView x, ConstTensorView y, const char* call) {
  if (d.is_cuda() && (x.layout != Layout::NHWC || y.layout != Layout::NHWC))
    throw InternalError(std::string(call) + ": a blocked activation on a GPU");
}

/// InternalError unless a and b have one type (pooling only selects values)
/// and are NHWC.
void require_same_type(ConstTensorView a, ConstTensorView b, const char* call) {
  if (a.dtype != b.dtype)
    throw InternalError(std::string(call) + ": " + dtype_name(a.dtype) + " in, " + dtype_name(b.dtype) + " out");
  if (a.layout != Layout::NHWC || b.layout != Layout::NHWC) throw InternalError(std::string(call) + ": a blocked tensor");
}

}  // namespace

Conv2DOp::Conv2DOp(Conv2DParams p) : p_(p) {}
Conv2DOp::~Conv2DOp() = default;
Conv2DOp::Conv2DOp(Conv2DOp&&) noexcept = default;
Conv2DOp& Conv2DOp::operator=(Conv2DOp&&) noexcept = default;
ConvBackend& Conv2DOp::on(const Device& d) {
  if (!impl_) impl_ = make_conv2d(d, p_);
  return *impl_;
}
void Conv2DOp::forward(const Device& d, ConstTensorView x, ConvWeights w, Activation act, TensorView y) {
  require_nhwc_on_gpu(d, x, y, "Conv2DOp::forward");
  on(d).forward(x, w, act, y);
}
void Conv2DOp::backward(const Device& d, const ConvBackwardArgs& a) {
  require_nhwc_on_gpu(d, a.x, a.y, "Conv2DOp::backward");
  if (backward_wanted(a, "Conv2DOp::backward")) on(d).backward(a);
}
bool Conv2DOp::takes_blocked(const Device& d, Shape xs, Shape ys, DType x, DType y) {
  return on(d).takes_blocked(xs, ys, x, y);
}

Conv2DTransposeOp::Conv2DTransposeOp(Conv2DParams p) : p_(p) {}
Conv2DTransposeOp::~Conv2DTransposeOp() = default;
Conv2DTransposeOp::Conv2DTransposeOp(Conv2DTransposeOp&&) noexcept = default;
Conv2DTransposeOp& Conv2DTransposeOp::operator=(Conv2DTransposeOp&&) noexcept = default;
ConvBackend& Conv2DTransposeOp::on(const Device& d) {
  if (!impl_) impl_ = make_conv2d_transpose(d, p_);
  return *impl_;
}
void Conv2DTransposeOp::forward(const Device& d, ConstTensorView x, ConvWeights w, Activation act, TensorView y) {
  require_nhwc_on_gpu(d, x, y, "Conv2DTransposeOp::forward");
  on(d).forward(x, w, act, y);
}
void Conv2DTransposeOp::backward(const Device& d, const ConvBackwardArgs& a) {
  require_nhwc_on_gpu(d, a.x, a.y, "Conv2DTransposeOp::backward");
  if (backward_wanted(a, "Conv2DTransposeOp::backward")) on(d).backward(a);
}
bool Conv2DTransposeOp::takes_blocked(const Device& d, Shape xs, Shape ys, DType x, DType y) {
  return on(d).takes_blocked(xs, ys, x, y);
}

MaxPool2DOp::MaxPool2DOp(Pool2DParams p) : p_(p) {}
MaxPool2DOp::~MaxPool2DOp() = default;
MaxPool2DOp::MaxPool2DOp(MaxPool2DOp&&) noexcept = default;
MaxPool2DOp& MaxPool2DOp::operator=(MaxPool2DOp&&) noexcept = default;
PoolBackend& MaxPool2DOp::on(const Device& d) {
  if (!impl_) impl_ = make_max_pool2d(d, p_);
  return *impl_;
}
void MaxPool2DOp::forward(const Device& d, ConstTensorView x, TensorView y, bool training) {
  require_same_type(x, y, "MaxPool2DOp::forward");
  on(d).forward(x, y, training);
}
void MaxPool2DOp::backward(const Device& d, ConstTensorView dy, TensorView dx) {
  require_same_type(dy, dx, "MaxPool2DOp::backward");
  on(d).backward(dy, dx);
}

BatchNormOp::BatchNormOp() = default;
BatchNormOp::~BatchNormOp() = default;
BatchNormOp::BatchNormOp(BatchNormOp&&) noexcept = default;
BatchNormOp& BatchNormOp::operator=(BatchNormOp&&) noexcept = default;
BatchNormBackend& BatchNormOp::on(const Device& d) {
  if (!impl_) impl_ = make_batch_norm(d);
  return *impl_;
}

}  // namespace trainer
