#pragma once
// A training sample as Trainer::gather copies it into a batch: the held
// sample (data/held_samples.h) flipped or turned and warped in its own type
// (uint8 for 8-bit files) in one pass, then converted to float32 with the
// brightness factor in a second. The symmetry and the affine transform are
// one OpenCV warp (their maps composed); a symmetry alone is OpenCV's
// flip/transpose.
#include "config/config.h"
#include "core/tensor.h"
#include "data/affine_augmentation.h"
#include "data/augmentation.h"

namespace trainer {

/// One sample's augmentation, as drawn for its training step and position.
struct SampleAugmentation {
  Symmetry symmetry = 0;  ///< draw_symmetry's (0: none).
  bool warp = false;      ///< Whether to warp by draw (the config's affine()).
  AffineDraw draw;        ///< draw_affine's (its brightness applies whenever it is not 1).
};

/// image_to [H, W, C] and mask_to [H, W, 1] (unless nullptr) <- held sample
/// i of images (and masks) with a applied (cfg: fill_mode and cval), as
/// float32: the image in [0, 255] (bilinear in the held type: an 8- or 16-bit
/// image rounds each warped pixel, and cfg.cval, to a whole value of its
/// type, within half a gray level of interpolating in float32), the mask by
/// nearest neighbour (kIgnoredPixel kept). InternalError for a transposing
/// symmetry of a non-square sample or samples held as bf16.
void augmented_sample_to_float(const AugmentationConfig& cfg, const SampleAugmentation& a, const Tensor& images,
                               const Tensor* masks, int i, float* image_to, float* mask_to);

}  // namespace trainer
