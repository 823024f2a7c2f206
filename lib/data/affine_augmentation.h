#pragma once
// The random affine transform and brightness of Keras's ImageDataGenerator
// (rotation_range, width_shift_range, height_shift_range, shear_range,
// zoom_range, fill_mode, cval, brightness_range) for a training sample and
// its mask, through OpenCV's warpAffine. As for the flips, each sample's
// draw comes from (seed, training step, the sample's position in the global
// batch), so towers draw the same ones and a resumed run continues them.
#include <array>
#include <cstdint>

#include <opencv2/core.hpp>

#include "config/config.h"

namespace trainer {

/// One sample's draw: angles in degrees, shifts in pixels, zoom factors and
/// the brightness factor (1 and 0 for what cfg leaves out).
struct AffineDraw {
  double theta = 0;                 ///< Rotation, U(-rotation_range, rotation_range).
  double shift_x = 0, shift_y = 0;  ///< Pixels, U(-r, r) times the width (height) when r < 1.
  double shear = 0;                 ///< U(-shear_range, shear_range).
  double zoom_x = 1, zoom_y = 1;    ///< Each U(zoom_low, zoom_high).
  double brightness = 1;            ///< U(brightness_low, brightness_high).
};

/// The draw of the sample at `position` (0-based, in the global batch) of
/// training step `step`, for an h x w sample.
AffineDraw draw_affine(const AugmentationConfig& cfg, uint64_t seed, uint64_t step, uint64_t position, int h, int w);

/// The map from an output pixel (x, y) to the source point it samples,
/// {m0, m1, m2, m3, m4, m5}: source = (m0 x + m1 y + m2, m3 x + m4 y + m5),
/// OpenCV's inverse warpAffine matrix. With A = R(theta) Sh(shear) Z(zoom_x,
/// zoom_y), c the centre ((w - 1) / 2, (h - 1) / 2) and t the shift: source
/// = c + A (p - c) + R(theta) t, the order of Keras's
/// apply_affine_transform (rotation @ shift @ shear @ zoom about the centre),
/// with R(a) = [[cos a, -sin a], [sin a, cos a]], Sh(s) = [[1, -sin s], [0,
/// cos s]]; each shift along the axis its range names (docs/config.md says
/// where Keras differs).
std::array<double, 6> affine_matrix(const AffineDraw& d, int h, int w);

/// The map p -> outer(inner(p)) of two maps in affine_matrix's form (an
/// output pixel's source under inner, then that point's source under outer).
std::array<double, 6> compose(const std::array<double, 6>& outer, const std::array<double, 6>& inner);

/// image_out [h, w, c] <- image warped by m (each output pixel's source, as
/// affine_matrix) bilinearly; mask_out <- mask [h, w, 1] by nearest
/// neighbour unless mask is empty, so binary masks stay 0/1 and class masks
/// keep their classes (and ignored pixels). Outside the image,
/// cfg.fill_mode: constant (the image cfg.cval times cval_scale, the held
/// type's units per pixel value: 1, or 65535 / 255 for 16-bit pixels; the
/// mask 0), nearest (the edge pixel), reflect (d c b a | a b c d), wrap
/// (periodic, a b c d | a b c d). Any OpenCV element type; the outputs are
/// (re)allocated as their inputs and must not share their data. An 8- or
/// 16-bit image is interpolated in OpenCV's fixed point and rounded to whole
/// values.
void warp_sample(const AugmentationConfig& cfg, const std::array<double, 6>& m, double cval_scale, const cv::Mat& image,
                 cv::Mat& image_out, const cv::Mat& mask, cv::Mat& mask_out);


}  // namespace trainer
