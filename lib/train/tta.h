#pragma once
// Test-time augmentation (TTA), as DSB 2018 solutions used it: the model's
// probabilities averaged over the symmetries of the input, each prediction
// mapped back before the average, so the result is equivariant under them.
#include "core/tensor.h"
#include "train/trainer.h"

namespace trainer {

/// images [N, H, W, C] (float 0..255, as Trainer::predict takes them) ->
/// probabilities [N, H, W, Cout]: the mean over the 8 symmetries of the
/// square (H == W; the 4 flips otherwise) of s^-1(predict(s(images))),
/// batch_size images per global batch. Costs 8 (or 4) predictions.
Tensor predict_tta(Trainer& trainer, const Tensor& images, int batch_size);

/// Loss and metric counts of probabilities [N, H, W, 1] against masks of that
/// shape (0 or 1), as Trainer::evaluate reports them for logits: each p is
/// clipped to [1e-7, 1 - 1e-7] (Keras's epsilon for losses on probabilities)
/// and turned into the logit log(p / (1 - p)), then the config's loss (plus
/// the trainer's regularization penalty) and the metrics take it. A
/// categorical model's probabilities [N, H, W, K] (against class-index masks
/// [N, H, W, 1], kIgnoredPixel where ignored) become the logits log p, whose
/// softmax they are; with an ignored class the N samples are one global
/// batch, whose loss is the mean over its counted pixels. For averaged (TTA)
/// predictions, which have no logits.
BatchStats probability_stats(const Trainer& trainer, const Tensor& probabilities, const Tensor& masks);

/// Logs that predictions average over the symmetries of an input of shape
/// input (8 or 4 of them), at most once per call site's loop.
void log_tta(const Shape& input);

}  // namespace trainer
