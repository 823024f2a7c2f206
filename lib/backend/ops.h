#pragma once
// Backend op interface for the convolution and pooling layers. Layers call these
// op objects with their tower's Device and never see the library behind them
// (oneDNN on the CPU, in backend/cpu/; cuDNN on a GPU, in backend/cuda/). Every
// tensor is NHWC ([N, H, W, C], row-major) on that device, but for the
// activations a CPU Winograd convolution takes in oneDNN's blocked layout
// (Layout::Blocked16: Conv2DOp::takes_blocked; a view carries its layout, and
// an op that cannot take it raises InternalError); weights, bias and their
// gradients are fp32 in Keras's layout. Activations (x, y and their
// gradients) have the DType passed with them: fp32 or bf16. An op object binds to the device of its first call (every
// later call must pass the same device) and caches its library primitives (on
// a GPU: descriptors and the algorithm chosen for that shape) per input shape,
// so repeated calls with the same shapes allocate nothing. One op object must
// not be used from two threads at once; different op objects may run
// concurrently (the towers do). On a GPU the calls are queued on the tower's
// compute stream and return before the work finishes.
//
// Backward reads the forward's tensors: the backward calls of an op get the x
// (and, for pooling, the y) of its last training forward, and the caller must
// not change their data in between. The layers guarantee it for what their
// Layer::backward_reads() declares (the model keeps those tensors until the
// layer's backward has run; the others it lends to other tensors): a layer
// whose op reads a tensor again, even by a pointer kept from forward, must
// declare it. The ops rely on it: MaxPool2DOp reads x and y again by pointer
// (on a GPU, and on the CPU for 2x2 windows of stride 2), and the
// convolutions reuse the copy of x made in forward (bf16 or padded on a GPU,
// reordered on the CPU) when the pointer and shapes match.
#include <memory>

#include "backend/elementwise_math.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/tensor_view.h"

namespace trainer {

/// Padding of one spatial dimension, in pixels: before (top/left) and after
/// (bottom/right).
struct PadPair {
  int before = 0, after = 0;
};

/// Output length of a convolution or pooling window along one dimension, as
/// Keras's conv_output_length (keras/utils/conv_utils.py), with k the pixels
/// the window spans (a dilated kernel's Conv2DParams::span_h / span_w):
/// valid: floor((in - k) / stride) + 1 (<= 0 when in < k: an empty output);
/// same: ceil(in / stride).
int conv_output_length(int in, int k, int stride, bool same);

/// Output length of a transposed convolution along one dimension, as Keras's
/// deconv_output_length without output_padding: valid: in*stride + max(k - stride, 0);
/// same: in*stride.
int conv_transpose_output_length(int in, int k, int stride, bool same);

/// Padding of the convolution that maps `big` pixels to `small` pixels with
/// window span k (pixels) and stride s (for Conv2D / pooling: big = input, small = output;
/// for Conv2DTranspose, the transposed one: big = output, small = input).
/// TensorFlow's rule: total = max((small - 1)*s + k - big, 0); before =
/// total / 2, the extra pixel of an odd total goes after (bottom/right).
/// 'valid' sizes always give total = 0.
PadPair conv_padding(int big, int small, int k, int s);

/// Filters (cuDNN's K: Conv2D's output channels, Conv2DTranspose's input
/// channels) below which a GPU convolution in bf16 runs in tf32 on fp32
/// tensors instead: cuDNN's bf16 kernels pad K to a tensor-core tile, and
/// the U-Net's 64 -> 1 mask layer took 1.9 ms of an H200 step in bf16 against
/// 1.0 ms in tf32 (cuda/cudnn_conv.h, conv_precision). Such a layer keeps
/// fp32 activations (ConvLayerBase::dtype_support), so it reads and writes
/// in place rather than converting.
constexpr int kMinBf16Filters = 8;

/// Whether a convolution with `filters` filters (as for kMinBf16Filters) cut
/// into `groups` groups computes in bf16 when its device's precision is bf16:
/// at least kMinBf16Filters filters, ungrouped. Every backend and the layers'
/// activation types (ConvLayerBase::dtype_support) follow it; otherwise the
/// convolution runs on fp32 tensors (tf32 on a GPU, fp32 on a CPU, where
/// AMX tiles are 16 outputs wide and the conversions cost more than a
/// one-filter convolution).
constexpr bool bf16_convolution(int filters, int groups) { return filters >= kMinBf16Filters && groups == 1; }

/// Alignment (bytes) of each region a GPU convolution call takes from its
/// tower's workspace (cuda/cudnn_conv.cpp), which the memory plan follows.
constexpr size_t kWorkspaceAlign = 256;

/// Geometry of Conv2D / Conv2DTranspose: kernel size, strides, padding,
/// dilation (Keras's dilation_rate; Conv2D only, and only with strides 1).
struct Conv2DParams {
  int kh = 1, kw = 1;                  ///< Kernel height, width (taps).
  int stride_h = 1, stride_w = 1;      ///< Strides (pixels).
  bool same_padding = false;           ///< Keras padding: 'same' if true, else 'valid'.
  int dilation_h = 1, dilation_w = 1;  ///< Distance in pixels between neighbouring kernel taps (1: adjacent).
  /// Keras's groups (Conv2D only): the input and output channels are cut
  /// into this many contiguous groups, output group g convolving input group
  /// g alone, so the kernel is [kh, kw, Cin / groups, Cout]. A DepthwiseConv2D
  /// of depth_multiplier M is groups = Cin with Cout = Cin * M, whose Keras
  /// kernel [kh, kw, Cin, M] holds the same values in the same order.
  int groups = 1;
  /// Pixels the kernel covers along H / W: (k - 1) * dilation + 1 (Keras's
  /// dilated filter size, keras/utils/conv_utils.py conv_output_length).
  int span_h() const { return (kh - 1) * dilation_h + 1; }
  int span_w() const { return (kw - 1) * dilation_w + 1; }
};

/// Geometry of MaxPooling2D and AveragePooling2D.
struct Pool2DParams {
  int ph = 2, pw = 2;              ///< Pool (window) height, width (pixels).
  int stride_h = 2, stride_w = 2;  ///< Strides (pixels).
  /// Keras padding: 'same' or 'valid'. Padded pixels never win a max and are
  /// not counted in an average.
  bool same_padding = false;
};

/// A convolution's fp32 weights on the device, in Keras's layout (see the op
/// classes below for each one's kernel shape).
struct ConvWeights {
  const float* kernel = nullptr;
  const float* bias = nullptr;  ///< [Cout], or nullptr: no bias.
};

/// What a convolution's backward reads and writes (Conv2DOp::backward).
struct ConvBackwardArgs {
  Activation act;  ///< The forward's fused activation.
  /// The forward's output after act [N, Ho, Wo, Cout]: its type and shape
  /// always; its data is read only when act is not Linear (may be nullptr then).
  ConstTensorView y;
  const void* dy = nullptr;       ///< dL/dy, of y's type, shape and layout.
  ConstTensorView x;              ///< The last training forward's input [N, H, W, Cin], unchanged.
  const float* kernel = nullptr;  ///< The forward's kernel.
  float* dkernel = nullptr;       ///< dL/dkernel (kernel's shape), or nullptr: not wanted (a frozen layer).
  float* dbias = nullptr;         ///< dL/dbias [Cout], or nullptr; only with dkernel.
  void* dx = nullptr;             ///< dL/dx, of x's type, shape and layout, or nullptr: not wanted.
};

/// One device's implementation of a convolution-like op (Conv2D or
/// Conv2DTranspose), made by cpu::make_conv2d / cuda::make_conv2d and friends
/// (backend/device_ops.h). Arguments as the op classes below.
class ConvBackend {
 public:
  virtual ~ConvBackend() = default;
  virtual void forward(ConstTensorView x, ConvWeights w, Activation act, TensorView y) = 0;
  virtual void backward(const ConvBackwardArgs& a) = 0;
  /// Whether x [N, H, W, Cin] -> y (shapes xs, ys; types x, y) runs on
  /// kernels that read and write Layout::Blocked16 activations as they are
  /// (the CPU's Winograd convolutions). Default: false.
  virtual bool takes_blocked(Shape xs, Shape ys, DType x, DType y) {
    (void)xs, (void)ys, (void)x, (void)y;
    return false;
  }
};

/// One device's implementation of MaxPool2DOp. Arguments as MaxPool2DOp's.
class PoolBackend {
 public:
  virtual ~PoolBackend() = default;
  virtual void forward(ConstTensorView x, TensorView y, bool training) = 0;
  virtual void backward(ConstTensorView dy, TensorView dx) = 0;
};

/// 2-D convolution (cross-correlation, as Keras's Conv2D).
///   x [N, H, W, Cin], kernel [kh, kw, Cin / groups, Cout] (Keras layout),
///   bias [Cout] or nullptr, y [N, Ho, Wo, Cout] with Ho =
///   conv_output_length(H, kh, ...). x's and y's types may differ (a bf16 GPU tower's
///   first convolution reads fp32 and writes bf16); the arithmetic follows the
///   context's precision, not the storage types.
/// The caller passes consistent shapes (the layer's shape inference checked
/// them); library failures raise InternalError naming the call, the device
/// and the layer.
class Conv2DOp {
 public:
  explicit Conv2DOp(Conv2DParams p);
  ~Conv2DOp();
  Conv2DOp(Conv2DOp&&) noexcept;
  Conv2DOp& operator=(Conv2DOp&&) noexcept;

  /// y <- act(conv(x, kernel) + bias) (on a GPU in one pass after the convolution).
  void forward(const Device& d, ConstTensorView x, ConvWeights w, Activation act, TensorView y);
  /// The layer's backward (ConvBackwardArgs): dz = dy * act'(y), then
  /// dkernel [kh, kw, Cin / groups, Cout] and dbias [Cout] <- dL/dw from x and
  /// dz (dbias only with dkernel, InternalError otherwise), and dx [N, H, W,
  /// Cin] <- dL/dx from dz, each overwritten. Nothing runs when dkernel and
  /// dx are both nullptr (a frozen layer whose input needs no gradient).
  /// x must be the last training forward's input, unchanged (see above); dx
  /// must not alias dy or y. One call so that a GPU fuses the activation
  /// gradient with its bf16 conversion and the bias gradient
  /// (cuda/conv_epilogue.h); the CPU runs the three steps. InternalError for
  /// an act whose gradient needs its input (activation_needs_input: the
  /// layers run those linear and apply them themselves, nn/layers/kept_activation.h).
  void backward(const Device& d, const ConvBackwardArgs& a);
  /// Whether on d this convolution from xs to ys (activation types x, y)
  /// reads and writes Layout::Blocked16 activations without reordering them
  /// (a CPU Winograd convolution: backend/cpu/conv_algorithm.h); the op
  /// takes views of either layout on any device where it says so, and of
  /// NHWC only elsewhere.
  bool takes_blocked(const Device& d, Shape xs, Shape ys, DType x, DType y);

 private:
  ConvBackend& on(const Device& d);
  Conv2DParams p_;
  std::unique_ptr<ConvBackend> impl_;
};

/// Transposed 2-D convolution (Keras's Conv2DTranspose, the gradient of Conv2D
/// with respect to its input).
///   x [N, H, W, Cin], kernel [kh, kw, Cout, Cin] (Keras layout: output channels
///   before input channels), bias [Cout] or nullptr, y [N, Ho, Wo, Cout] with
///   Ho = conv_transpose_output_length(H, kh, ...).
/// Library failures raise InternalError naming the call, the device and the layer.
class Conv2DTransposeOp {
 public:
  explicit Conv2DTransposeOp(Conv2DParams p);
  ~Conv2DTransposeOp();
  Conv2DTransposeOp(Conv2DTransposeOp&&) noexcept;
  Conv2DTransposeOp& operator=(Conv2DTransposeOp&&) noexcept;

  /// y <- act(conv_transpose(x, kernel) + bias) (on a GPU in one pass after the convolution).
  void forward(const Device& d, ConstTensorView x, ConvWeights w, Activation act, TensorView y);
  /// The layer's backward, as Conv2DOp::backward: y, dy [N, Ho, Wo, Cout],
  /// dkernel [kh, kw, Cout, Cin], dbias [Cout], dx [N, H, W, Cin].
  void backward(const Device& d, const ConvBackwardArgs& a);
  /// As Conv2DOp::takes_blocked (false on every device today).
  bool takes_blocked(const Device& d, Shape xs, Shape ys, DType x, DType y);

 private:
  ConvBackend& on(const Device& d);
  Conv2DParams p_;
  std::unique_ptr<ConvBackend> impl_;
};

/// Max pooling, as Keras's MaxPooling2D: x [N, H, W, C] -> y [N, Ho, Wo, C],
/// Ho = conv_output_length(H, ph, stride_h, same), x, y and their gradients
/// all of one type. Padded pixels never win.
/// Library failures raise InternalError naming the call, the device and the layer.
class MaxPool2DOp {
 public:
  explicit MaxPool2DOp(Pool2DParams p);
  ~MaxPool2DOp();
  MaxPool2DOp(MaxPool2DOp&&) noexcept;
  MaxPool2DOp& operator=(MaxPool2DOp&&) noexcept;

  /// y <- maxpool(x). With training = true the op remembers this call for
  /// backward() (x and y, or on the CPU for other than 2x2 windows of stride
  /// 2 where each maximum came from).
  void forward(const Device& d, ConstTensorView x, TensorView y, bool training);
  /// dx [N, H, W, C] <- dL/dx from dy [N, Ho, Wo, C] (overwrites dx): each dy
  /// goes to the position of its maximum in the last training forward() call,
  /// which must have had the same shapes.
  void backward(const Device& d, ConstTensorView dy, TensorView dx);

 private:
  PoolBackend& on(const Device& d);
  Pool2DParams p_;
  std::unique_ptr<PoolBackend> impl_;
};

}  // namespace trainer
