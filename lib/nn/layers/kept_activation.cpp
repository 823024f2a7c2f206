#include "nn/layers/kept_activation.h"

#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/activation.h"
#include "nn/layers/on_device.h"

namespace trainer {

void KeptActivation::forward(const Context& ctx, Activation a, Tensor& y) {
  if (!activation_needs_input(a.kind)) return;
  if (ctx.training) on_device(z_, ctx.device).copy_from(y);
  activation_forward(ctx.device, a, y.data(), y.numel());
}

const Tensor& KeptActivation::backward(const Context& ctx, Activation a, const Tensor& dy, const std::string& layer) {
  if (!activation_needs_input(a.kind)) return dy;
  if (!(z_.shape() == dy.shape()) || z_.device() != ctx.device)
    throw InternalError("layer '" + layer + "': backward through its " + activation_name(a) +
                        " without its training forward");
  Tensor& dz = on_device(dz_, ctx.device);
  dz.resize(dy.shape());
  activation_backward(ctx.device, a, z_.data(), dy.data(), dz.data(), dy.numel());
  return dz;
}

}  // namespace trainer
