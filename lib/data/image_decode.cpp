#include "data/image_decode.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "core/ascii.h"
#include "core/error.h"
#include "core/file_kind.h"
#include "data/held_samples.h"
#include "data/image_header.h"
#include "data/mask_resize.h"
#include "core/class_mask.h"

namespace trainer {

namespace {

// Colour conversion code from the file's channels (1, 3 BGR, 4 BGRA) to `to` (1 gray, 3 RGB); -1: none.
int conversion(int from, int to) {
  if (to == 3) return from == 1 ? cv::COLOR_GRAY2RGB : from == 3 ? cv::COLOR_BGR2RGB : cv::COLOR_BGRA2RGB;
  return from == 1 ? -1 : from == 3 ? cv::COLOR_BGR2GRAY : cv::COLOR_BGRA2GRAY;
}

/// Whether the chunks of the PNG in `in` (size bytes), walked by their lengths from the signature, reach
/// an IEND chunk before the file ends.
bool has_iend_chunk(std::ifstream& in, std::streamoff size) {
  std::streamoff at = 8;
  while (at + 8 <= size) {
    in.clear();
    in.seekg(at);
    unsigned char b[8] = {};
    if (!in.read(reinterpret_cast<char*>(b), 8)) return false;
    if (std::string(reinterpret_cast<char*>(b) + 4, 4) == "IEND") return true;
    const uint32_t length = uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3];
    at += 12 + std::streamoff(length);
  }
  return false;
}

}  // namespace

void check_whole_png(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  in.read(head, sizeof head);
  if (in.gcount() != 8 || std::string(head, 8) != std::string("\x89PNG\r\n\x1a\n", 8)) return;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  // The IEND chunk ("IEND" and its CRC) ends a PNG: looked for in the last KiB, then (bytes after it, which
  // decoders ignore) by walking the chunks.
  const std::streamoff tail_size = std::min<std::streamoff>(size - 8, 1024);
  std::string tail(size_t(std::max<std::streamoff>(tail_size, 0)), '\0');
  in.seekg(size - std::streamoff(tail.size()));
  in.read(tail.data(), std::streamsize(tail.size()));
  if (tail.find(std::string("IEND\xae\x42\x60\x82", 8)) == std::string::npos && !has_iend_chunk(in, size))
    throw UserError("cannot decode '" + path + "': the PNG ends before its IEND chunk (" + std::to_string(size) +
                    " bytes: truncated, e.g. by an interrupted copy); copy it again or remove it");
}

cv::Mat read_image_file(const std::string& path) {
  require_plain_file(path, "image", "give image files (PNG, JPEG, TIFF)");
  check_image_format(path);  // OpenCV would try any decoder it has on the content
  check_whole_png(path);  // libpng would print "Read Error" on its own line before our message
  require_image_size(path);
  check_image_pixels(path);  // before a decoder allocates what the header declares
  cv::Mat m;
  try {
    m = cv::imread(path, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    // e.msg is OpenCV's multi-part text with its source path; e.err is the failed check alone.
    if (e.func == "validateInputImageSize")
      throw UserError("cannot decode '" + path + "': its header gives a size OpenCV refuses to read (" +
                      e.err.substr(0, e.err.find('\n')) + "); a damaged file, or an image larger than "
                      "OPENCV_IO_MAX_IMAGE_PIXELS (2^30 pixels by default; the environment variable raises it)");
    throw UserError("cannot decode '" + path + "': OpenCV: " + e.err.substr(0, e.err.find('\n')));
  }
  if (m.empty())
    throw UserError("cannot decode '" + path + "' (corrupt, truncated or not an image)");
  if (m.depth() != CV_8U && m.depth() != CV_16U)
    throw UserError("'" + path + "' has " + std::to_string(m.elemSize1() * 8) +
                    "-bit pixels of a type other than unsigned integer; save it as 8- or 16-bit");
  if (m.channels() != 1 && m.channels() != 3 && m.channels() != 4)
    throw UserError("'" + path + "' has " + std::to_string(m.channels()) +
                    " channels; use gray, RGB or RGBA images");
  return m;
}

cv::Mat read_label_image(const std::string& path) {
  cv::Mat labels = read_image_file(path);
  if (labels.channels() != 1)
    throw UserError("label image '" + path + "' has " + std::to_string(labels.channels()) +
                    " channels; label images are single-channel 8- or 16-bit images holding 0 for background and "
                    "1..N for the objects (pass binary masks with --masks)");
  return labels;
}

cv::Size scaled_size(cv::Size size, double scale) {
  return {std::max(1, int(std::lround(size.width * scale))), std::max(1, int(std::lround(size.height * scale)))};
}

DecodedImage decode_image_pixels(const std::string& path, int height, int width, int channels, double* highest16) {
  DecodedImage d{read_image_file(path), {}};
  cv::Mat& m = d.pixels;
  d.native = m.size();
  if (highest16) {
    *highest16 = -1;
    if (m.depth() == CV_16U) cv::minMaxLoc(m.reshape(1), nullptr, highest16);
  }
  try {
    int code = conversion(m.channels(), channels);
    if (code >= 0) cv::cvtColor(m, m, code);
    if (height > 0 && d.native != cv::Size(width, height)) cv::resize(m, m, cv::Size(width, height), 0, 0, cv::INTER_AREA);
  } catch (const cv::Exception& e) {
    throw UserError("cannot convert '" + path + "': " + e.err.substr(0, e.err.find('\n')));
  }
  return d;
}

cv::Size decode_image(const std::string& path, int height, int width, int channels, float* out,
                      double* highest16) {
  const DecodedImage d = decode_image_pixels(path, height, width, channels, highest16);
  held_pixels_to_float(d.pixels, 1.f, out);
  return d.native;
}

size_t tiff_pages(const std::string& path) {
  const std::string ext = ascii_lower(std::filesystem::path(path).extension().string());
  if (ext != ".tif" && ext != ".tiff") return 1;
  try {
    return std::max<size_t>(cv::imcount(path, cv::IMREAD_UNCHANGED), 1);
  } catch (const cv::Exception&) {
    return 1;  // its decoding says what is wrong
  }
}

namespace {

/// Whether single-channel mask m (8U or 16U) holds values in (0, half] mostly in plateaus, as a label image's
/// objects are (each pixel one label, the same as its right and lower neighbours inside an object), not as a
/// binary mask's anti-aliased or resized edges are (values that change from pixel to pixel).
bool looks_like_labels(const cv::Mat& m, double half) {
  if (m.rows < 2 || m.cols < 2) return false;
  const cv::Mat low = (m > 0) & (m <= half);
  const int lows = cv::countNonZero(low);
  if (lows < 16) return false;
  const cv::Rect inner(0, 0, m.cols - 1, m.rows - 1);
  const cv::Mat same = low(inner) & (m(inner) == m(inner + cv::Point(1, 0))) & (m(inner) == m(inner + cv::Point(0, 1)));
  return cv::countNonZero(same) * 2 > lows;
}

}  // namespace

cv::Size decode_mask(const std::string& path, int height, int width, float* out, MaskValues* values) {
  return binarize_mask(read_image_file(path), path, height, width, out, values);
}

cv::Size binarize_mask(const cv::Mat& file, const std::string& path, int height, int width, float* out,
                       MaskValues* values) {
  cv::Mat m = file;
  const cv::Size native = m.size();
  try {
    if (m.channels() == 4) {  // a shape drawn in the alpha channel over one colour (annotation tools' export)
      std::vector<cv::Mat> planes;
      cv::split(m, planes);
      bool one_colour = true;  // each of B, G and R one value everywhere (red is one colour too)
      for (int c = 0; c < 3 && one_colour; ++c) {
        double lo = 0, hi = 0;
        cv::minMaxLoc(planes[size_t(c)], &lo, &hi);
        one_colour = lo == hi;
      }
      double alpha_lo = 0, alpha_hi = 0;
      cv::minMaxLoc(planes[3], &alpha_lo, &alpha_hi);
      if (one_colour && alpha_lo != alpha_hi) m = planes[3];
    }
    int code = conversion(m.channels(), 1);
    if (code >= 0) cv::cvtColor(m, m, code);
    double half = m.depth() == CV_16U ? 32767 : 127, highest = 0;
    cv::minMaxLoc(m, nullptr, &highest);
    MaskValues kind = highest == 0      ? MaskValues::kEmpty
                      : highest <= half ? MaskValues::kAnyNonzero  // 0/1 or labels 1..K: every object counts
                                        : MaskValues::kThresholded;
    // Looked for only when asked (checking or loading), not in each step's decoding.
    if (values && kind == MaskValues::kThresholded && looks_like_labels(m, half)) kind = MaskValues::kLabelLike;
    if (kind == MaskValues::kAnyNonzero) half = 0;
    if (values) *values = kind;
    const cv::Mat binary = (m > half) / 255;  // 8U: exactly 1 or 0
    cv::Mat dst(height, width, CV_32FC1, out);
    resize_mask(binary, dst.size()).convertTo(dst, CV_32F);
  } catch (const cv::Exception& e) {
    throw UserError("cannot convert '" + path + "': " + e.err.substr(0, e.err.find('\n')));
  }
  return native;
}

/// How to train on binary masks, for the class-mask errors.
static const std::string kBinaryFix =
    "Train it with a binary loss (binary_crossentropy, binary_focal_crossentropy, ...) and a 1-filter output (a "
    "sigmoid, or linear with from_logits: true)";

cv::Size decode_class_mask(const std::string& path, int height, int width, int classes, float* out,
                           int ignore_class) {
  cv::Mat m = read_image_file(path);
  const cv::Size native = m.size();
  try {
    if (m.channels() > 1) {
      std::vector<cv::Mat> planes;
      cv::split(m, planes);
      if (cv::countNonZero(planes[0] != planes[1]) > 0 || cv::countNonZero(planes[0] != planes[2]) > 0)
        throw UserError("mask '" + path + "' is a colour image (a palette PNG reads as its colours): class masks "
                        "are single-channel images whose pixels are the class indices 0.." +
                        std::to_string(classes - 1) + "; save each pixel's class index as a gray value");
      m = planes[0];
    }
    // The pixels holding ignore_class (none when the image's type cannot hold it).
    const bool can_ignore = ignore_class >= 0 && ignore_class <= (m.depth() == CV_8U ? 255 : 65535);
    const cv::Mat ignored = can_ignore ? cv::Mat(m == ignore_class) : cv::Mat();
    double highest = 0;
    cv::Point at;
    if (!can_ignore) cv::minMaxLoc(m, nullptr, &highest, nullptr, &at);
    else if (cv::countNonZero(ignored) < int(m.total())) cv::minMaxLoc(m, nullptr, &highest, nullptr, &at, ~ignored);
    if (highest >= classes) {
      const bool binary = highest == 255 || highest == 65535;
      const bool labels = !binary && m.depth() == CV_16U;  // an instance label image (1..N)?
      const std::string ext = ascii_lower(std::filesystem::path(path).extension().string());
      const bool jpeg = ext == ".jpg" || ext == ".jpeg";  // lossy: values between and beyond the classes at edges
      throw UserError("mask '" + path + "' holds class " + std::to_string(int(highest)) + " at pixel (x " +
                      std::to_string(at.x) + ", y " + std::to_string(at.y) + "), but the model has " +
                      std::to_string(classes) + " classes (its output channels), so mask pixels must be 0.." +
                      std::to_string(classes - 1) +
                      (ignore_class >= 0 && !can_ignore
                           ? "; the loss's ignore_class " + std::to_string(ignore_class) +
                                 " cannot occur in this 8-bit mask (its values are 0..255): save the masks 16-bit, "
                                 "or mark the pixels to ignore with a value up to 255"
                       : ignore_class < 0 && highest == 255
                           ? "; if 255 marks pixels to ignore (void), train with {type: SparseCategoricalCrossentropy, "
                             "ignore_class: 255} in training.loss, keeping its other keys (the other categorical "
                             "losses have no ignore_class); a binary 0/255 mask? " + kBinaryFix
                       : jpeg ? "; JPEG's lossy compression changes a class mask's values near the edges between "
                                "classes: save the class masks as PNG"
                           : binary ? "; a binary 0/" + std::to_string(int(highest)) + " mask? " + kBinaryFix
                              : labels ? "; an instance label image (0, 1..N)? Make class masks from label images with "
                                         "build/data_tools/labels_to_classes, or renumber the mask's classes"
                                       : "; give the model one output channel per class, or renumber the mask's classes"));
    }
    cv::Mat dst(height, width, CV_32FC1, out);
    m = resize_mask(m, dst.size());
    m.convertTo(dst, CV_32F);
    if (can_ignore) dst.setTo(kIgnoredPixel, m == ignore_class);
  } catch (const cv::Exception& e) {
    throw UserError("cannot convert '" + path + "': " + e.err.substr(0, e.err.find('\n')));
  }
  return native;
}

}  // namespace trainer
