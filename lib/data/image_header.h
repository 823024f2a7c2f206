#pragma once
// An image file's width and height read from its header, before anything
// decodes it: a PNG of a few KB can declare 30000 x 30000 pixels (a
// decompression bomb) that a decoder would allocate in full.
#include <opencv2/core.hpp>

#include <optional>
#include <string>

namespace trainer {

/// The width and height that path's header declares, for PNG (IHDR), JPEG
/// (the first SOFn frame header), TIFF (the first IFD's ImageWidth and
/// ImageLength, as libtiff reads them: the first of a repeated tag, any
/// integer type; classic TIFF, either byte order) and BMP; nullopt for other
/// formats, a header that cannot be read (a damaged file: the decoder then
/// says so) or a file that cannot be opened. Reads the header's bytes
/// alone: a JPEG's segments and a TIFF's IFD are sought, not read through.
std::optional<cv::Size> image_header_size(const std::string& path);

/// Throws UserError naming path when it is empty, or when its first bytes
/// are the signature of none of PNG, JPEG, TIFF and BMP, the formats trainer reads: OpenCV goes
/// by the content, not the name, and would hand a file named .png to any
/// decoder it has (DICOM's GDCM aborted the process on a damaged file).
/// A file that cannot be opened passes (the decoder then says so).
void check_image_format(const std::string& path);

/// The largest image decode_image_pixels and read_image_file accept, in
/// pixels (width x height): Pillow's MAX_IMAGE_PIXELS, 89,478,485, unless
/// set_image_pixel_limit changed it.
size_t image_pixel_limit();

/// Sets the limit for this process (0: none beyond OpenCV's own,
/// OPENCV_IO_MAX_IMAGE_PIXELS), and `source`, the config key or flag that
/// gave it, for messages (e.g. "data.max_image_pixels").
void set_image_pixel_limit(size_t pixels, const std::string& source);

/// The tile size a tiled TIFF's first IFD declares (TileWidth,
/// TileLength): libtiff's decoder allocates a tile whole, whatever the
/// image's size. nullopt for an untiled TIFF and other formats.
std::optional<cv::Size> image_tile_size(const std::string& path);

/// Throws UserError naming path, its size, the limit and where the limit
/// comes from when image_header_size(path) or image_tile_size(path)
/// exceeds image_pixel_limit(). No check with a limit of 0.
void check_image_pixels(const std::string& path);

/// Throws UserError "cannot decode '<path>' (corrupt, truncated or not an
/// image)" when a file that opens declares no size image_header_size can
/// read: a damaged header, whose decoder might find a size of any
/// magnitude past check_image_pixels. No check with a pixel limit of 0.
void require_image_size(const std::string& path);

}  // namespace trainer
