#include "data/image_header.h"

#include <algorithm>
#include <atomic>
#include <climits>
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

/// n bytes of in at offset; fewer (possibly none) where the file ends.
Bytes read_at(std::ifstream& in, uint64_t offset, size_t n) {
  in.clear();
  in.seekg(std::streamoff(offset));
  Bytes b(n);
  in.read(reinterpret_cast<char*>(b.data()), std::streamsize(n));
  b.resize(size_t(std::max<std::streamsize>(in.gcount(), 0)));
  return b;
}

std::optional<cv::Size> size_of(uint32_t width, uint32_t height) {
  if (width == 0 || height == 0 || width > uint32_t(INT32_MAX) || height > uint32_t(INT32_MAX)) return std::nullopt;
  return cv::Size(int(width), int(height));
}

std::optional<cv::Size> png_size(const Bytes& head) {
  if (head.size() < 24 || std::string(head.begin() + 12, head.begin() + 16) != "IHDR") return std::nullopt;
  return size_of(big32(head, 16), big32(head, 20));
}

/// Where libjpeg finds the next marker from `at` (jdmarker.c, next_marker): past any bytes up to an 0xFF and
/// past an 0xFF followed by 0; the offset of that 0xFF, or nullopt at the end of the file.
std::optional<uint64_t> next_marker(std::ifstream& in, uint64_t at) {
  for (Bytes b; !(b = read_at(in, at, 4096)).empty(); at += b.size() - 1) {
    for (size_t k = 0; k + 1 < b.size(); ++k)
      if (b[k] == 0xFF && b[k + 1] != 0x00) return at + k;
    if (b.size() < 2) return std::nullopt;
  }
  return std::nullopt;
}

/// The first SOFn segment's height and width (ITU T.81 B.2.2), stepping over the segments before it
/// (EXIF and other APPn segments of any size) by their lengths, and over bytes that are no marker as libjpeg
/// does (a damaged file's decoder still finds the frame past them); at most 1000 segments.
std::optional<cv::Size> jpeg_size(std::ifstream& in) {
  uint64_t at = 2;
  for (int segments = 0; segments < 1000; ++segments) {
    Bytes b = read_at(in, at, 9);
    if (b.size() >= 2 && (b[0] != 0xFF || b[1] == 0x00)) {
      const std::optional<uint64_t> marker = next_marker(in, at);
      if (!marker) return std::nullopt;
      b = read_at(in, at = *marker, 9);
    }
    if (b.size() < 4 || b[0] != 0xFF) return std::nullopt;
    const unsigned marker = b[1];
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD9)) {  // no length
      at += 2;
      continue;
    }
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) return b.size() == 9 ? size_of(big16(b, 7), big16(b, 5)) : std::nullopt;
    const uint32_t length = big16(b, 2);
    if (length < 2) return std::nullopt;
    at += 2 + length;
  }
  return std::nullopt;
}

/// What a TIFF's first IFD declares of its size: ImageWidth (256), ImageLength (257), TileWidth (322) and
/// TileLength (323); 0 where absent or unreadable.
struct TiffDims {
  uint32_t width = 0, height = 0, tile_width = 0, tile_height = 0;
};

/// An IFD entry's single value as libtiff's TIFFReadDirEntryLong takes it: BYTE, SHORT, LONG, their signed
/// kinds (negative: none) and LONG8 and SLONG8 (stored at the entry's offset, 8 bytes); nullopt otherwise.
std::optional<uint32_t> tiff_value(std::ifstream& in, const Bytes& e, size_t at, bool little) {
  const auto u16 = [&](size_t k) { return little ? little16(e, k) : big16(e, k); };
  const auto u32 = [&](size_t k) { return little ? little32(e, k) : big32(e, k); };
  const uint32_t type = u16(at + 2), count = u32(at + 4);
  if (count != 1) return std::nullopt;
  const size_t v = at + 8;
  switch (type) {
    case 1: return uint32_t(e[v]);                                                       // BYTE
    case 6: return int8_t(e[v]) < 0 ? std::nullopt : std::optional<uint32_t>(e[v]);       // SBYTE
    case 3: return u16(v);                                                               // SHORT
    case 8: return int16_t(u16(v)) < 0 ? std::nullopt : std::optional<uint32_t>(u16(v));  // SSHORT
    case 4: return u32(v);                                                               // LONG
    case 9: return int32_t(u32(v)) < 0 ? std::nullopt : std::optional<uint32_t>(u32(v));  // SLONG
    case 16:
    case 17: {  // LONG8, SLONG8: past 32 bits is no size libtiff takes
      const Bytes w = read_at(in, u32(v), 8);
      if (w.size() < 8) return std::nullopt;
      const uint64_t hi = little ? little32(w, 4) : big32(w, 0), lo = little ? little32(w, 0) : big32(w, 4);
      return hi == 0 ? std::optional<uint32_t>(uint32_t(lo)) : std::nullopt;
    }
    default: return std::nullopt;
  }
}

/// The first IFD's sizes (TIFF 6.0, section 2), read where the header's offset says (libtiff writes the IFD
/// after the pixels). A tag given twice counts once, at its first entry, as libtiff reads it.
TiffDims tiff_dims(std::ifstream& in, bool little) {
  TiffDims d;
  const Bytes head = read_at(in, 0, 8);
  if (head.size() < 8) return d;
  const uint64_t ifd = little ? little32(head, 4) : big32(head, 4);
  const Bytes count = read_at(in, ifd, 2);
  if (count.size() < 2) return d;
  const size_t n = little ? little16(count, 0) : big16(count, 0);
  const Bytes e = read_at(in, ifd + 2, 12 * n);
  bool seen[4] = {false, false, false, false};
  uint32_t* fields[4] = {&d.width, &d.height, &d.tile_width, &d.tile_height};
  for (size_t k = 0; k < n && 12 * (k + 1) <= e.size(); ++k) {
    const uint32_t tag = little ? little16(e, 12 * k) : big16(e, 12 * k);
    const int field = tag == 256 ? 0 : tag == 257 ? 1 : tag == 322 ? 2 : tag == 323 ? 3 : -1;
    if (field < 0 || seen[field]) continue;
    seen[field] = true;
    *fields[field] = tiff_value(in, e, 12 * k, little).value_or(0);
  }
  return d;
}

/// The TIFF at in's image size and, when it is tiled, its tile size (libtiff's decoder holds a tile whole).
std::pair<std::optional<cv::Size>, std::optional<cv::Size>> tiff_sizes(std::ifstream& in, bool little) {
  const TiffDims d = tiff_dims(in, little);
  return {size_of(d.width, d.height), size_of(d.tile_width, d.tile_height)};
}

/// BITMAPINFOHEADER and later (32-bit width, height; negative height: rows top-down), or OS/2's
/// BITMAPCOREHEADER (12 bytes: 16-bit width and height).
std::optional<cv::Size> bmp_size(const Bytes& head) {
  if (head.size() < 26) return std::nullopt;
  if (little32(head, 14) == 12) return size_of(little16(head, 18), little16(head, 20));
  const int64_t height = int32_t(little32(head, 22));
  return size_of(little32(head, 18), uint32_t(std::min<int64_t>(height < 0 ? -height : height, UINT32_MAX)));
}

constexpr size_t kPillowLimit = 89478485;  // Pillow's MAX_IMAGE_PIXELS: 0.25 GiB of 24-bit pixels
std::atomic<size_t> g_limit{kPillowLimit};
std::mutex g_source_mutex;
std::string g_source = "data.max_image_pixels";

}  // namespace

std::optional<cv::Size> image_header_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const Bytes head = read_at(in, 0, 32);
  if (head.size() < 8) return std::nullopt;
  const std::string magic(head.begin(), head.begin() + 8);
  if (magic == std::string("\x89PNG\r\n\x1a\n", 8)) return png_size(head);
  if (head[0] == 0xFF && head[1] == 0xD8) return jpeg_size(in);
  if (magic.compare(0, 4, "II*\0", 4) == 0) return tiff_sizes(in, true).first;
  if (magic.compare(0, 4, "MM\0*", 4) == 0) return tiff_sizes(in, false).first;
  if (magic.compare(0, 2, "BM") == 0) return bmp_size(head);
  return std::nullopt;
}

void check_image_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  const Bytes head = read_at(in, 0, 132);
  if (head.empty())
    throw UserError("cannot decode '" + path + "': the file is empty (0 bytes), as a copy or download cut short "
                    "leaves it; replace it with the image, or remove it");
  const std::string magic(head.begin(), head.begin() + long(std::min<size_t>(head.size(), 4)));
  // OpenCV hands a file with DICOM's preamble mark ("DICM" at byte 128) to GDCM whatever its first bytes are.
  const bool dicom = head.size() == 132 && std::string(head.begin() + 128, head.end()) == "DICM";
  const bool signed_as_ours = magic == "\x89PNG" || magic.compare(0, 2, "\xFF\xD8") == 0 ||
                             magic == std::string("II*\0", 4) || magic == std::string("MM\0*", 4) ||
                             magic.compare(0, 2, "BM") == 0;
  const bool known = signed_as_ours && !dicom;
  if (!known)
    throw UserError("cannot decode '" + path + "': it is no PNG, JPEG, TIFF or BMP image (its first bytes are none "
                    "of their signatures, or it bears DICOM's mark), whatever its name says; convert it to PNG or TIFF, or remove it");
}

size_t image_pixel_limit() { return g_limit.load(); }

void set_image_pixel_limit(size_t pixels, const std::string& source) {
  g_limit.store(pixels);
  std::lock_guard<std::mutex> lock(g_source_mutex);
  g_source = source;
}

std::optional<cv::Size> image_tile_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const Bytes head = read_at(in, 0, 4);
  if (head.size() < 4) return std::nullopt;
  const std::string magic(head.begin(), head.end());
  if (magic == std::string("II*\0", 4)) return tiff_sizes(in, true).second;
  if (magic == std::string("MM\0*", 4)) return tiff_sizes(in, false).second;
  return std::nullopt;
}

namespace {

/// The config key or flag that set the limit, for messages.
std::string limit_source() {
  std::lock_guard<std::mutex> lock(g_source_mutex);
  return g_source;
}

void refuse_size(const std::string& path, const std::string& what, cv::Size size, size_t limit) {
  const std::string source = limit_source();
  throw UserError("'" + path + "' declares " + what + std::to_string(size.width) + " x " +
                  std::to_string(size.height) + " = " + std::to_string(size_t(size.width) * size_t(size.height)) +
                  " pixels, more than the " + std::to_string(limit) + " that " + source +
                  " allows (Pillow's MAX_IMAGE_PIXELS by default): a damaged file or a decompression bomb, or a "
                  "whole slide to cut into tiles first; raise " + source + " if it is meant");
}

}  // namespace

void require_image_size(const std::string& path) {
  if (image_pixel_limit() == 0 || image_header_size(path)) return;
  if (std::ifstream(path, std::ios::binary))  // else the decoder says why it cannot be read
    throw UserError("cannot decode '" + path + "' (corrupt, truncated or not an image)");
}

void check_image_pixels(const std::string& path) {
  const size_t limit = image_pixel_limit();
  if (limit == 0) return;
  const std::optional<cv::Size> size = image_header_size(path);
  if (size && size_t(size->width) * size_t(size->height) > limit) refuse_size(path, "", *size, limit);
  if (const std::optional<cv::Size> tile = image_tile_size(path);
      tile && size_t(tile->width) * size_t(tile->height) > limit)
    refuse_size(path, "tiles of ", *tile, limit);
}

}  // namespace trainer
