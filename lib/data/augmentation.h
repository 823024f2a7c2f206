#pragma once
// Random flips and quarter turns of training samples, the same for an image
// and its mask: Keras's ImageDataGenerator(horizontal_flip=True,
// vertical_flip=True), plus rotations by multiples of 90 degrees (the
// symmetries of the square, which nuclei images have: no orientation is
// special). Each sample's transform is drawn from (seed, training step, the
// sample's position in the global batch), so it does not depend on how the
// batch is split over towers, and a resumed run draws the same ones.
#include <array>
#include <cstdint>

#include <opencv2/core.hpp>

#include "config/config.h"

namespace trainer {

/// The key of one training sample's random draws: a splitmix64 mix of the run's
/// seed, a salt naming the kind of draw (so flips, affine transforms and
/// Dropout draw independently), the training step and the sample's position
/// in the global batch.
uint64_t sample_key(uint64_t seed, uint64_t salt, uint64_t step, uint64_t position);

/// One symmetry of an H x W grid, as three bits applied to a destination
/// pixel (y, x) to find its source: bit 0 flips x (left-right), bit 1 flips y
/// (up-down), then bit 2 swaps y and x (a transpose; needs H == W). The 8
/// values are the 8 symmetries of the square; 0 is the identity.
using Symmetry = unsigned;

/// The symmetries cfg allows (always including the identity), each drawn with
/// equal probability: {identity, left-right} for horizontal_flip, {identity,
/// up-down} for vertical_flip, the four quarter turns for rotate_90, and the
/// group they generate when combined (both flips: 4; a flip with rotate_90: 8).
/// Returns their count and writes them to out[0..count).
int allowed_symmetries(const AugmentationConfig& cfg, Symmetry out[8]);

/// The symmetry of the sample at `position` (0-based, in the global batch)
/// of training step `step`: uniform over allowed_symmetries(cfg).
Symmetry draw_symmetry(const AugmentationConfig& cfg, uint64_t seed, uint64_t step, uint64_t position);

/// The symmetry that undoes s: s itself without a transpose; with one, s with
/// its two flips exchanged (flip-then-swap is undone by swap-then-flip).
Symmetry inverse_symmetry(Symmetry s);

/// dst [h, w, c] <- src [h, w, c] transformed by s: dst(y, x) = src(source of
/// (y, x) per Symmetry). s with bit 2 needs h == w (InternalError otherwise);
/// src and dst must not overlap.
void apply_symmetry(Symmetry s, const float* src, float* dst, int h, int w, int c);

/// apply_symmetry on an OpenCV image of any element type; dst is
/// (re)allocated to src's size and type and must not share src's data.
void apply_symmetry(Symmetry s, const cv::Mat& src, cv::Mat& dst);

/// s as the map from an output pixel (x, y) of an h x w image to its source
/// pixel, {m0, .., m5}: source = (m0 x + m1 y + m2, m3 x + m4 y + m5) (the
/// form of affine_matrix in data/affine_augmentation.h). s with bit 2 needs
/// h == w (InternalError otherwise).
std::array<double, 6> symmetry_matrix(Symmetry s, int h, int w);

}  // namespace trainer
