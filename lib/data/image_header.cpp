#include "data/image_header.h"

#include <atomic>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace trainer {

namespace {

using Bytes = std::vector<unsigned char>;

uint32_t big16(const Bytes& b, size_t at) { return uint32_t(b[at]) << 8 | b[at + 1]; }
uint32_t big32(const Bytes& b, size_t at) { return big16(b, at) << 16 | big16(b, at + 2); }
uint32_t little16(const Bytes& b, size_t at) { return uint32_t(b[at + 1]) << 8 | b[at]; }
uint32_t little32(const Bytes& b, size_t at) { return little16(b, at + 2) << 16 | little16(b, at); }

std::optional<cv::Size> size_of(uint32_t width, uint32_t height) {
  if (width == 0 || height == 0 || width > uint32_t(INT32_MAX) || height > uint32_t(INT32_MAX)) return std::nullopt;
  return cv::Size(int(width), int(height));
}

std::optional<cv::Size> png_size(const Bytes& b) {
  if (b.size() < 24 || std::string(b.begin() + 12, b.begin() + 16) != "IHDR") return std::nullopt;
  return size_of(big32(b, 16), big32(b, 20));
}

/// The first SOFn segment's height and width (ITU T.81 B.2.2); markers with a length are stepped over.
std::optional<cv::Size> jpeg_size(const Bytes& b) {
  size_t at = 2;
  while (at + 4 <= b.size()) {
    if (b[at] != 0xFF) return std::nullopt;
    const unsigned marker = b[at + 1];
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD9)) {  // no length
      at += 2;
      continue;
    }
    const size_t length = big16(b, at + 2);
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) return at + 9 <= b.size() ? size_of(big16(b, at + 7), big16(b, at + 5)) : std::nullopt;
    if (length < 2) return std::nullopt;
    at += 2 + length;
  }
  return std::nullopt;
}

/// The first IFD's ImageWidth (256) and ImageLength (257), SHORT or LONG (TIFF 6.0, section 2).
std::optional<cv::Size> tiff_size(const Bytes& b) {
  const bool little = b[0] == 'I';
  const auto u16 = [&](size_t at) { return little ? little16(b, at) : big16(b, at); };
  const auto u32 = [&](size_t at) { return little ? little32(b, at) : big32(b, at); };
  const size_t ifd = u32(4);
  if (ifd + 2 > b.size()) return std::nullopt;
  uint32_t width = 0, height = 0;
  for (size_t k = 0, n = u16(ifd); k < n && ifd + 2 + 12 * (k + 1) <= b.size(); ++k) {
    const size_t e = ifd + 2 + 12 * k;
    const uint32_t tag = u16(e), type = u16(e + 2), value = type == 3 ? u16(e + 8) : u32(e + 8);
    if (type != 3 && type != 4) continue;
    if (tag == 256) width = value;
    if (tag == 257) height = value;
  }
  return size_of(width, height);
}

std::optional<cv::Size> bmp_size(const Bytes& b) {
  if (b.size() < 26) return std::nullopt;
  const int32_t height = int32_t(little32(b, 22));  // negative: rows stored top-down
  return size_of(little32(b, 18), uint32_t(height < 0 ? -int64_t(height) : height));
}

constexpr size_t kPillowLimit = 89478485;  // Pillow's MAX_IMAGE_PIXELS: 0.25 GiB of 24-bit pixels
std::atomic<size_t> g_limit{kPillowLimit};
std::mutex g_source_mutex;
std::string g_source = "data.max_image_pixels";

}  // namespace

std::optional<cv::Size> image_header_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Bytes b(size_t(256) << 10);
  in.read(reinterpret_cast<char*>(b.data()), std::streamsize(b.size()));
  b.resize(size_t(in.gcount()));
  if (b.size() < 8) return std::nullopt;
  const std::string head(b.begin(), b.begin() + 8);
  if (head == std::string("\x89PNG\r\n\x1a\n", 8)) return png_size(b);
  if (b[0] == 0xFF && b[1] == 0xD8) return jpeg_size(b);
  if (head.compare(0, 4, "II*\0", 4) == 0 || head.compare(0, 4, "MM\0*", 4) == 0) return tiff_size(b);
  if (head.compare(0, 2, "BM") == 0) return bmp_size(b);
  return std::nullopt;
}

size_t image_pixel_limit() { return g_limit.load(); }

void set_image_pixel_limit(size_t pixels, const std::string& source) {
  g_limit.store(pixels);
  std::lock_guard<std::mutex> lock(g_source_mutex);
  g_source = source;
}

void check_image_pixels(const std::string& path) {
  const size_t limit = image_pixel_limit();
  if (limit == 0) return;
  const std::optional<cv::Size> size = image_header_size(path);
  if (!size || size_t(size->width) * size_t(size->height) <= limit) return;
  std::string source;
  {
    std::lock_guard<std::mutex> lock(g_source_mutex);
    source = g_source;
  }
  throw UserError("'" + path + "' declares " + std::to_string(size->width) + " x " + std::to_string(size->height) +
                  " = " + std::to_string(size_t(size->width) * size_t(size->height)) + " pixels, more than the " +
                  std::to_string(limit) + " that " + source + " allows (Pillow's MAX_IMAGE_PIXELS by default): a "
                  "damaged file or a decompression bomb, or a whole slide to cut into tiles first; raise " + source +
                  " if it is meant");
}

}  // namespace trainer
