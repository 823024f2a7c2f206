#pragma once
// Test helpers for the data pipeline: a training sample's transforms on
// float32 copies, one after the other, the reference that
// data/training_sample.h's one pass in the held type is tested against.
#include "config/config.h"
#include "core/tensor.h"
#include "data/affine_augmentation.h"

namespace trainer::testing {

/// out [H, W, C] <- sample i of held images as float32 in [0, 255] (U8 as
/// they are, U16 times 255/65535, F32 copied).
void image_sample_to_float(const Tensor& images, int i, float* out);

/// Transforms one sample in place: image [h, w, c] (float 0..255, c 1 or 3)
/// resampled bilinearly and multiplied by d.brightness (clipped to [0, 255]);
/// mask [h, w, 1] (may be null) with the same geometry by nearest neighbour,
/// so binary masks stay 0/1 and class masks keep their classes (and ignored
/// pixels). Outside the image, cfg.fill_mode: constant (the image cfg.cval,
/// the mask 0), nearest (the edge pixel), reflect (d c b a | a b c d), wrap
/// (periodic, a b c d | a b c d).
void apply_affine(const AugmentationConfig& cfg, const AffineDraw& d, float* image, float* mask, int h, int w, int c);

}  // namespace trainer::testing
