#pragma once
// The activation of a convolution-like layer (Conv2D, Conv2DTranspose, Dense,
// DepthwiseConv2D, SeparableConv2D) when its gradient needs its input
// (activation_needs_input: gelu, silu, hard_silu, mish). The backend's
// convolution takes the activation's gradient from the output y alone, so such
// a layer runs its convolution linear (fused_activation), keeps the
// pre-activation z on the tower's device and applies f itself: two more
// tensors of the output's size per layer (z and its gradient; TensorFlow keeps
// z too). Tensors are fp32 [N, H, W, C]: such a layer writes fp32 from inputs
// of either type (DTypeSupport::AnyInput).
#include <string>

#include "core/tensor.h"
#include "nn/layer.h"

namespace trainer {

/// What the convolution itself applies: a, or linear when a needs its input.
inline Activation fused_activation(Activation a) { return activation_needs_input(a.kind) ? Activation{} : a; }

class KeptActivation {
 public:
  /// When a needs its input: y <- f(y) in place, y being the convolution's
  /// linear output z, of which a training forward first keeps a copy.
  /// Nothing otherwise (the convolution applied a).
  void forward(const Context& ctx, Activation a, Tensor& y);
  /// dL/dz of the last training forward's z for dy = dL/dy (fp32, y's shape):
  /// dy * f'(z) in a tensor kept here when a needs its input, else dy itself.
  /// InternalError naming layer when no training forward kept z of dy's shape.
  const Tensor& backward(const Context& ctx, Activation a, const Tensor& dy, const std::string& layer);

 private:
  Tensor z_, dz_;  ///< The pre-activation and its gradient, on the tower's device.
};

}  // namespace trainer
