#pragma once
// LayerDescription: what one layer computes in inference mode, as plain data,
// for exporters (nn/onnx_export.h) that rebuild the network in another format.
// Each layer fills it from the values it was built with (Layer::describe()),
// so no exporter re-reads the YAML or repeats a default. The weights are not
// part of it: they are the layer's param_specs() entries (Keras names and
// layouts), which the exporter takes from the model's weight records.
#include <vector>

#include "backend/ops.h"
#include "nn/activation.h"

namespace trainer {

/// The operation of a layer in inference mode.
enum class LayerKind {
  Input,               ///< The model's input [N, H, W, C]; nothing to compute.
  Identity,            ///< y = x (Dropout at inference).
  Rescaling,           ///< y = x * scale + offset.
  Conv2D,              ///< y = act(conv(x, kernel) + bias); kernel [kh, kw, Cin, Cout].
  Conv2DTranspose,     ///< y = act(conv_transpose(x, kernel) + bias); kernel [kh, kw, Cout, Cin].
  SeparableConv2D,     ///< y = act(conv1x1(depthwise(x, depthwise_kernel), pointwise_kernel) + bias); groups = Cin.
  MaxPooling2D,        ///< y = max over each window; padded pixels never win.
  AveragePooling2D,    ///< y = mean over each window's pixels inside the input (padding not counted).
  UpSampling2D,        ///< Nearest neighbour, y[i, j] = x[i / size_h, j / size_w], or bilinear (half-pixel centres).
  Cropping2D,          ///< y[i, j] = x[pad_h.before + i, pad_w.before + j]; pad_* as the pixels removed.
  ZeroPadding2D,       ///< y[pad_h.before + i, pad_w.before + j] = x[i, j], 0 in the pad_* border.
  Concatenate,         ///< Inputs joined along the channel axis, in input order.
  Add,                 ///< y = sum of the inputs (same shapes, or 1x1-pixel ones broadcast).
  Multiply,            ///< y = x_0 * x_1 (same shapes, or one input of 1 channel, or of 1x1 pixels, broadcast).
  Reshape,             ///< y = x with another shape, the elements in the same NHWC order.
  Activation,          ///< y = act(x), or softmax(x) over the channels.
  PReLU,               ///< y = x > 0 ? x : alpha * x; alpha is the layer's weight [ah, aw, ac].
  BatchNormalization,  ///< y = gamma * (x - moving_mean) / sqrt(moving_variance + epsilon) + beta.
  GroupNormalization,  ///< y = gamma * (x - mean) / sqrt(var + epsilon) + beta, mean and var of each sample's group.
  LayerNormalization,  ///< The same with mean and var of each pixel's channels.
};

/// A layer's inference-mode operation and its hyper-parameters. Only the fields
/// named for the layer's kind are meaningful; the others keep their defaults.
struct LayerDescription {
  LayerKind kind = LayerKind::Identity;
  /// Conv2D, Conv2DTranspose, MaxPooling2D, AveragePooling2D: window (kernel or pool) size and strides, pixels.
  int kh = 1, kw = 1, stride_h = 1, stride_w = 1;
  /// Conv2D: distance in pixels between neighbouring kernel taps, 1 when adjacent
  /// (Keras's dilation_rate, ONNX 'dilations').
  int dilation_h = 1, dilation_w = 1;
  /// Conv2D: channel groups (ONNX Conv 'group'; DepthwiseConv2D: the input's channels).
  /// GroupNormalization: the groups of consecutive channels normalised together.
  int groups = 1;
  /// Conv2D, MaxPooling2D, AveragePooling2D: pixels padded before (top/left) and after
  /// (bottom/right) the input, TensorFlow's 'same' rule (the extra pixel of an
  /// odd total goes after). Conv2DTranspose: pixels cropped from the start and
  /// end of the full transposed-convolution output (ONNX ConvTranspose 'pads').
  /// Cropping2D: rows (pad_h) and columns (pad_w) removed at each side;
  /// ZeroPadding2D: added at each side.
  PadPair pad_h, pad_w;
  /// Conv2D, Conv2DTranspose: whether a bias weight exists.
  bool use_bias = false;
  /// Conv2D, Conv2DTranspose (after the bias), Activation.
  Activation activation;  ///< Default linear.
  /// Conv2D, Conv2DTranspose, Activation: a softmax over the channels follows
  /// (the activation is then linear; only the last layer has one).
  bool softmax = false;
  /// Rescaling.
  float scale = 1.f, offset = 0.f;
  /// BatchNormalization, GroupNormalization, LayerNormalization: added to the
  /// variance. Missing gamma means 1, missing beta 0.
  double epsilon = 1e-3;
  /// UpSampling2D: integer factors along H and W.
  int size_h = 1, size_w = 1;
  /// UpSampling2D: bilinear interpolation with half-pixel centres (else nearest).
  bool bilinear = false;
  /// Multiply: the input broadcast to the other's shape (-1: none; it has 1
  /// channel, or 1x1 pixels).
  int broadcast_input = -1;
  /// Reshape: the per-sample input and output shapes. Multiply: the
  /// broadcast input's per-sample shape and the product's. GroupNormalization,
  /// LayerNormalization: the per-sample input shape.
  Shape input, output;
  /// Add: every input's per-sample shape (output: the sum's).
  std::vector<Shape> input_shapes;
};

}  // namespace trainer
