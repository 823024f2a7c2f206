#pragma once
// A training sample as Trainer::gather copies it into a batch: the held
// sample (data/held_samples.h) flipped or turned and warped in its own type
// (uint8 for 8-bit files) in one pass, then converted to float32 with the
// brightness factor in a second. The symmetry and the affine transform are
// one OpenCV warp (their maps composed); a symmetry alone is OpenCV's
// flip/transpose.
#include "backend/augment_math.h"
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

/// The augmentation cfg draws for the sample at `position` (0-based, in the
/// global batch) of training step `step`, for an h x w sample: its symmetry
/// (draw_symmetry), and its affine draw (draw_affine) when cfg has an affine
/// transform or a brightness range.
SampleAugmentation draw_sample_augmentation(const AugmentationConfig& cfg, uint64_t seed, uint64_t step,
                                            uint64_t position, int h, int w);

/// image_to [H, W, C] and mask_to [H, W, 1] (unless nullptr) <- held sample
/// i of images (and masks) with a applied (cfg: fill_mode and cval), as
/// float32: the image in [0, 255] (bilinear in the held type: an 8- or 16-bit
/// image rounds each warped pixel, and cfg.cval, to a whole value of its
/// type, within half a gray level of interpolating in float32), the mask by
/// nearest neighbour (kIgnoredPixel kept). InternalError for a transposing
/// symmetry of a non-square sample or samples held as bf16.
void augmented_sample_to_float(const AugmentationConfig& cfg, const SampleAugmentation& a, const Tensor& images,
                               const Tensor* masks, int i, float* image_to, float* mask_to);

/// a as the backend op augment_batch applies it (backend/augment_math.h) to
/// an h x w sample held in pixel_bytes-byte values (1: 8-bit, 2: 16-bit):
/// the symmetry's map composed with the affine one (the symmetry's alone
/// without a warp), and the scale of held units to [0, 255] times the
/// brightness, clamped when the brightness is not 1, as
/// augmented_sample_to_float computes them. InternalError as symmetry_matrix.
SampleWarp sample_warp(const SampleAugmentation& a, int h, int w, int pixel_bytes);

/// cfg's fill_mode and cval as augment_batch takes them for images held in
/// pixel_bytes-byte values: cval in held units (times 65535 / 255 for
/// 16-bit), rounded and limited to the type's range as OpenCV converts it.
void set_fill(const AugmentationConfig& cfg, int pixel_bytes, AugmentBatch& b);

}  // namespace trainer
