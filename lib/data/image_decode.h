#pragma once
// Decoding of one image or mask file with OpenCV (into its pixels or a float
// buffer), with the rules of docs/data.md (8/16-bit, gray/RGB/RGBA, RGB
// order, binarised masks).
#include <opencv2/core.hpp>
#include <string>

namespace trainer {

/// Reads path as OpenCV decodes it (cv::IMREAD_UNCHANGED): 8- or 16-bit,
/// with 1 (gray), 3 (BGR) or 4 (BGRA) channels. Throws UserError naming the
/// file when it is not a plain file (a FIFO would block), declares more
/// pixels than image_pixel_limit() (data/image_header.h), cannot be decoded
/// (missing, damaged, truncated, too large for OpenCV) or
/// has another pixel type or channel count, with the fix.
cv::Mat read_image_file(const std::string& path);

/// Throws UserError naming path when it is a PNG (by its signature) that
/// does not end in the IEND chunk: a truncated file, which libpng would
/// report on stderr in its own words before failing. Other files pass.
void check_whole_png(const std::string& path);

/// read_image_file of an instance label image (0 background, 1..N one
/// object each): single-channel 8U or 16U, as stored. Throws UserError as
/// read_image_file, and naming the file when it has colour channels.
cv::Mat read_label_image(const std::string& path);

/// size times scale (> 0), each side rounded to the nearest pixel and at least 1.
cv::Size scaled_size(cv::Size size, double scale);

/// A decoded image: its pixels, and the file's own size (width x height).
struct DecodedImage {
  cv::Mat pixels;
  cv::Size native;
};

/// Decodes path (PNG/JPEG/TIFF, 8- or 16-bit, gray, BGR or BGRA as OpenCV
/// reads them; alpha dropped), converts to RGB (channels 3) or gray (channels
/// 1, ITU-R BT.601 weights as cv::COLOR_BGR2GRAY) and resizes with INTER_AREA
/// to [height, width] (height = width = 0: kept at the file's own size), in the file's own type: pixels are CV_8UC(channels)
/// or CV_16UC(channels) (resizing rounds to that type's integers, as a Keras
/// pipeline that holds its resized images in a uint8 array does). highest16, when
/// given: set to the largest value of a 16-bit file (before resizing), -1
/// for an 8-bit one. Throws UserError naming the file when it cannot be
/// decoded or has another pixel type (e.g. 32-bit float).
DecodedImage decode_image_pixels(const std::string& path, int height, int width, int channels,
                                 double* highest16 = nullptr);

/// decode_image_pixels, then held_pixels_to_float (data/held_samples.h:
/// 8-bit values as they are, 16-bit ones times 255/65535) into out
/// [height, width, channels]. Returns the file's own size.
cv::Size decode_image(const std::string& path, int height, int width, int channels, float* out,
                      double* highest16 = nullptr);

/// The number of pages of a TIFF file (a z-stack, or channels saved as
/// pages), of which decode_image reads the first; 1 for other files and for
/// a file whose pages cannot be counted.
size_t tiff_pages(const std::string& path);

/// How decode_mask read a mask's values.
enum class MaskValues {
  kEmpty,        ///< All 0: no foreground.
  kThresholded,  ///< Some pixel above half the type's maximum: > half is foreground.
  /// Thresholded too, but most of its values in (0, half] form plateaus, as
  /// objects of a label image do: an 8-bit label image with labels above
  /// 127, whose labels 1..127 are then background (warned about).
  kLabelLike,
  kAnyNonzero,   ///< None above half (0/1 values, or labels 1..K): > 0 is foreground.
};

/// Decodes a mask file: gray as above (an RGBA file whose colour is one value
/// everywhere and whose alpha varies, a shape drawn in the alpha channel:
/// its alpha channel), then pixel > half the type's maximum
/// (127 for 8-bit, 32767 for 16-bit) -> 1, else 0; a mask with no pixel
/// above half (0/1 values, or a label image 0 = background, 1..K = one
/// object each) takes every pixel > 0 as 1 instead. Resized with
/// resize_mask (data/mask_resize.h: on the image, where INTER_NEAREST shifts
/// it) and written as [height, width, 1] float32 to out; *values
/// (when given) says which rule applied. Returns the file's own size.
/// Throws UserError as decode_image.
cv::Size decode_mask(const std::string& path, int height, int width, float* out, MaskValues* values = nullptr);

/// decode_mask of an image read_image_file(path) already gave (file: 8U or
/// 16U, 1, 3 or 4 channels, unchanged); path names it in errors.
cv::Size binarize_mask(const cv::Mat& file, const std::string& path, int height, int width, float* out,
                       MaskValues* values = nullptr);

/// Decodes a class mask for a model of `classes` classes (2..kMaxClasses):
/// a single-channel 8- or 16-bit image whose pixels are class indices
/// 0..classes-1 (an RGB or RGBA file whose colour channels are equal counts
/// as gray), and ignore_class (0..65535, or -1 for none) where pixels are to
/// be ignored. Resized with resize_mask and written as [height, width, 1]
/// float32 class indices to out, kIgnoredPixel (data/dataset.h) where the file
/// holds ignore_class. Returns the file's own size. Throws UserError naming
/// the file when it cannot be decoded, is a colour image, or holds a class >=
/// classes other than ignore_class (naming the value, its pixel and the fix).
cv::Size decode_class_mask(const std::string& path, int height, int width, int classes, float* out,
                           int ignore_class = -1);

}  // namespace trainer
