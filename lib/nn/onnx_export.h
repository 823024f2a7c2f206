#pragma once
// ONNX export of a model and its weights, for inference elsewhere (OpenCV's
// dnn module, ONNX Runtime, TensorRT). Format: docs/export.md.
//
// The graph takes "image", float32 [N, C, H, W] (NCHW, as ONNX and OpenCV dnn
// expect; N is free), holding the raw pixel values 0..255 that the model's
// Rescaling layer expects (RGB order for C = 3), and returns "probability",
// float32 [N, 1, H, W]: the model's output including its final sigmoid (or
// [N, K, H, W], the per-class probabilities of a model ending in a softmax).
// Opset 13 (ONNX 1.8+; OpenCV 4.6's importer reads it), IR version 7.
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "nn/model.h"

namespace trainer {

/// Writes model (built with its final sigmoid or softmax, i.e. not switched to logits)
/// with weights (in Keras layout, as Trainer::weights() returns them for this
/// model: same order, names and shapes) to path as an ONNX file, atomically
/// ("<path>.tmp-<pid>" written, fsync'ed and renamed over path).
/// Layer by layer (Dropout is the identity at inference and omitted):
///   Rescaling -> Mul (+ Add when offset != 0); Conv2D -> Conv with kernel
///   [kh, kw, in, out] transposed to [out, in, kh, kw] and explicit pads;
///   Conv2DTranspose -> ConvTranspose with kernel [kh, kw, out, in] transposed
///   to [in, out, kh, kw] and pads cropping the output (the asymmetric part
///   of the crop, which OpenCV 4.6 rejects in ConvTranspose, as a Slice); MaxPooling2D ->
///   MaxPool with explicit pads; AveragePooling2D -> AveragePool with explicit
///   pads (padding not counted); PReLU -> PRelu; Multiply -> Mul (a one-channel
///   input Expanded first); UpSampling2D -> Resize (nearest, asymmetric,
///   floor: y[i] = x[floor(i / size)], exactly Keras's); Concatenate -> Concat
///   on axis 1; Add -> Add (chained for more inputs); BatchNormalization ->
///   BatchNormalization with the moving statistics; GroupNormalization and
///   LayerNormalization -> InstanceNormalization between Reshapes (and
///   Transposes), then an exact BatchNormalization for gamma and beta
///   (docs/export.md); activations -> Relu / Sigmoid /
///   ...; a softmax over the channels -> Softmax on axis 1.
/// append: for a model trained with from_logits (its last layer outputs
/// logits), the activation its loss applies (Sigmoid, or Softmax over the
/// channels), added after the last layer so that the output is still
/// probabilities (the last layer's output is then "logits"); None otherwise.
/// Throws InternalError when weights do not match the model, the
/// model is not in inference form (output_is_logits()), or append is given
/// for a last layer with an activation of its own, UserError naming path
/// when the file cannot be written (missing or read-only folder, disk full),
/// InternalError when the built graph fails ONNX's checker.
void export_onnx(const Model& model, const std::vector<WeightRecord>& weights, const std::string& path,
                 OutputActivation append = OutputActivation::None);

}  // namespace trainer
