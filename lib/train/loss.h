#pragma once
// Segmentation losses on logits (the model's last layer is linear; the sigmoid
// is fused into the loss for numerical stability, as Keras's from_logits=True).
#include <string>

#include "core/tensor.h"

namespace trainer {

enum class LossKind { BinaryCrossentropy, Dice, BceDice };

/// "binary_crossentropy" | "dice" | "bce_dice"; std::invalid_argument naming the
/// known names otherwise (config validation reports the user-facing error).
LossKind loss_kind(const std::string& name);

/// logits, targets: [N, H, W, 1] (targets 0/1; any C works, a sample's pixels are
/// its H*W*C values). Returns the SUM over the N samples of the per-sample loss,
/// so that sums from several towers add up and the caller divides by the global batch.
///  - binary_crossentropy: mean over the sample's pixels of
///    max(z,0) - z*y + log(1+exp(-|z|)) (tf.nn.sigmoid_cross_entropy_with_logits;
///    finite for any finite z).
///  - dice: 1 - (2*sum(p*y) + 1) / (sum(p) + sum(y) + 1), p = sigmoid(z), per image,
///    smooth = 1 (the common Keras U-Net formulation; an empty prediction of an empty
///    mask gives loss 0).
///  - bce_dice: binary_crossentropy + dice.
/// If dlogits is non-null it is resized to logits' shape and receives
/// d(returned sum)/d(logits). Sums are accumulated in double. logits, targets
/// and dlogits live on one device (logits.device()), where the work runs; the
/// returned sum is a host value.
/// Throws std::invalid_argument when the shapes differ.
double loss_sum(LossKind kind, const Tensor& logits, const Tensor& targets, Tensor* dlogits);

}  // namespace trainer
