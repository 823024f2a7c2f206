// Image sizes read from file headers before decoding, and the pixel limit
// that refuses a decompression bomb (a small file declaring a huge image)
// before any decoder allocates it.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>
#include <opencv2/imgcodecs.hpp>

#include "config/config.h"
#include "core/error.h"
#include "data/image_decode.h"
#include "data/image_header.h"

using namespace trainer;
namespace fs = std::filesystem;

namespace {

/// A PNG of the signature, an IHDR declaring width x height (8-bit RGB) and IEND: a few dozen bytes.
std::string png_header_only(uint32_t width, uint32_t height) {
  const auto be32 = [](uint32_t v) {
    return std::string{char(v >> 24), char(v >> 16 & 0xFF), char(v >> 8 & 0xFF), char(v & 0xFF)};
  };
  return std::string("\x89PNG\r\n\x1a\n", 8) + be32(13) + "IHDR" + be32(width) + be32(height) +
         std::string("\x08\x02\x00\x00\x00", 5) + be32(0) + be32(0) + "IEND" + std::string("\xae\x42\x60\x82", 4);
}

/// One IFD entry of a little-endian classic TIFF: tag, type, count 1 and a value held in its 4 bytes.
struct TiffEntry {
  uint16_t tag, type;
  uint32_t value;
};

/// A little-endian classic TIFF holding the entries in its first IFD (right after the header) and 64 bytes of
/// pixels after it, at the offset entry 273 (StripOffsets) gets.
std::string tiff_with(const std::vector<TiffEntry>& entries) {
  const auto le = [](uint32_t v, int bytes) {
    std::string out;
    for (int k = 0; k < bytes; ++k) out += char(v >> (8 * k) & 0xFF);
    return out;
  };
  const uint32_t pixels = uint32_t(8 + 2 + 12 * entries.size() + 4);
  std::string out = std::string("II*\0", 4) + le(8, 4) + le(uint32_t(entries.size()), 2);
  for (const TiffEntry& e : entries)
    out += le(e.tag, 2) + le(e.type, 2) + le(1, 4) + le(e.tag == 273 ? pixels : e.value, e.type == 3 ? 2 : 4) +
           std::string(e.type == 3 ? 2 : 0, '\0');
  return out + le(0, 4) + std::string(64, '\0');
}

/// An 8-bit gray TIFF's entries but for its sizes.
std::vector<TiffEntry> gray_tiff(std::vector<TiffEntry> sizes) {
  for (TiffEntry e : std::vector<TiffEntry>{{258, 3, 8}, {259, 3, 1}, {262, 3, 1}, {273, 4, 0}, {277, 3, 1},
                                            {278, 4, 8}, {279, 4, 64}})
    sizes.push_back(e);
  return sizes;
}

}  // namespace

TEST_CASE("a TIFF's size is read as libtiff reads it: the first of a repeated tag, any integer type, its tiles",
          "[data]") {
  const fs::path dir = fs::temp_directory_path() / ("trainer_tiff_header_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto write = [&](const std::string& name, const std::vector<TiffEntry>& entries) {
    std::ofstream(dir / name, std::ios::binary) << tiff_with(entries);
    return (dir / name).string();
  };
  // Found by tests/fuzz: a second ImageWidth or a signed type hid a size of hundreds of megapixels from the
  // limit, and OpenCV allocated it.
  CHECK(image_header_size(write("repeated.tif", gray_tiff({{256, 4, 20000}, {256, 4, 8}, {257, 4, 8}}))) ==
        std::optional<cv::Size>(cv::Size(20000, 8)));
  CHECK(image_header_size(write("signed.tif", gray_tiff({{256, 9, 20000}, {257, 8, 20000}}))) ==
        std::optional<cv::Size>(cv::Size(20000, 20000)));
  CHECK(image_header_size(write("byte.tif", gray_tiff({{256, 1, 200}, {257, 3, 8}}))) ==
        std::optional<cv::Size>(cv::Size(200, 8)));
  CHECK_FALSE(image_header_size(write("negative.tif", gray_tiff({{256, 9, 0x80000000u}, {257, 3, 8}}))));
  const std::string tiled = write("tiled.tif", gray_tiff({{256, 3, 8}, {257, 3, 8}, {322, 4, 16384}, {323, 4, 16384}}));
  CHECK(image_tile_size(tiled) == std::optional<cv::Size>(cv::Size(16384, 16384)));
  set_image_pixel_limit(89478485, "data.max_image_pixels");
  CHECK_THROWS_WITH(check_image_pixels(dir / "signed.tif"), Catch::Contains("declares 20000 x 20000 = 400000000"));
  CHECK_THROWS_WITH(read_image_file(tiled),
                    Catch::Contains("'" + tiled + "' declares tiles of 16384 x 16384 = 268435456 pixels, more than "
                                    "the 89478485 that data.max_image_pixels allows"));
  // A header whose size cannot be read: its decoder might find any.
  const std::string sizeless = write("sizeless.tif", gray_tiff({{257, 3, 8}}));
  CHECK_THROWS_WITH(read_image_file(sizeless),
                    Catch::Contains("cannot decode '" + sizeless + "' (corrupt, truncated or not an image)"));
  set_image_pixel_limit(0, "data.max_image_pixels");
  CHECK_NOTHROW(require_image_size(sizeless));
  set_image_pixel_limit(89478485, "data.max_image_pixels");
  fs::remove_all(dir);
}

TEST_CASE("image_header_size reads PNG, JPEG, TIFF and BMP headers, and nothing else", "[data]") {
  const fs::path dir = fs::temp_directory_path() / ("trainer_image_header_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const cv::Mat image(23, 37, CV_8UC3, cv::Scalar(10, 20, 30));
  for (const char* ext : {".png", ".jpg", ".tif", ".bmp"}) {
    const std::string path = (dir / (std::string("a") + ext)).string();
    REQUIRE(cv::imwrite(path, image));
    INFO(ext);
    const std::optional<cv::Size> size = image_header_size(path);
    REQUIRE(size);
    CHECK(*size == cv::Size(37, 23));
  }
  const cv::Mat tall(300, 2, CV_16UC1, cv::Scalar(7));  // a 16-bit TIFF
  REQUIRE(cv::imwrite((dir / "tall.tif").string(), tall));
  CHECK(image_header_size((dir / "tall.tif").string()) == std::optional<cv::Size>(cv::Size(2, 300)));
  std::ofstream(dir / "text.png") << "not an image at all";
  CHECK_FALSE(image_header_size((dir / "text.png").string()));
  CHECK_FALSE(image_header_size((dir / "missing.png").string()));
  fs::remove_all(dir);
}

TEST_CASE("image_header_size finds headers past large segments, in either byte order, and survives hostile ones",
          "[data]") {
  const fs::path dir = fs::temp_directory_path() / ("trainer_image_header2_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return (dir / name).string();
  };
  // libtiff writes the IFD after the pixels: a TIFF of a few MB has it far from the start.
  cv::Mat big(700, 900, CV_8UC3);
  cv::randu(big, 0, 255);
  REQUIRE(cv::imwrite((dir / "big.tif").string(), big));
  CHECK(image_header_size((dir / "big.tif").string()) == std::optional<cv::Size>(cv::Size(900, 700)));
  // A JPEG with a 300 KB APP1 segment (EXIF) before its frame header.
  std::vector<unsigned char> jpeg;
  REQUIRE(cv::imencode(".jpg", cv::Mat(23, 37, CV_8UC3, cv::Scalar(5)), jpeg));
  std::string app1 = "\xFF\xE1\xFF\xFF" + std::string(0xFFFF - 2, 'x');
  std::string padded(jpeg.begin(), jpeg.begin() + 2);
  for (int k = 0; k < 5; ++k) padded += app1;
  padded += std::string(jpeg.begin() + 2, jpeg.end());
  CHECK(image_header_size(write("exif.jpg", padded)) == std::optional<cv::Size>(cv::Size(37, 23)));
  // Bytes that are no marker between segments (an 0xFF 0x00, then any), which libjpeg steps over to the frame
  // header (found by tests/fuzz: a 244-byte file decoded to gigabytes past the limit).
  std::string garbled(jpeg.begin(), jpeg.begin() + 2);
  garbled += std::string("\xFF\x00\x12\x34garbage\xFF", 12) + std::string(jpeg.begin() + 2, jpeg.end());
  CHECK(image_header_size(write("garbled.jpg", garbled)) == std::optional<cv::Size>(cv::Size(37, 23)));
  CHECK(cv::imread((dir / "garbled.jpg").string()).size() == cv::Size(37, 23));  // as libjpeg reads it
  // Big-endian TIFF, width as SHORT and height as LONG.
  const std::string mm = std::string("MM\0*\0\0\0\x08\0\x02", 10) +
                         std::string("\x01\x00\x00\x03\0\0\0\x01\x00\x25\0\0", 12) +
                         std::string("\x01\x01\x00\x04\0\0\0\x01\0\0\0\x17", 12);
  CHECK(image_header_size(write("mm.tif", mm)) == std::optional<cv::Size>(cv::Size(37, 23)));
  // OS/2 bitmap: a 12-byte header of 16-bit sizes.
  const std::string os2 = std::string("BM\0\0\0\0\0\0\0\0\x1a\0\0\0\x0c\0\0\0\x25\0\x17\0\x01\0\x18\0", 26);
  CHECK(image_header_size(write("os2.bmp", os2)) == std::optional<cv::Size>(cv::Size(37, 23)));
  // Hostile headers: offsets and lengths past the end, a height of INT32_MIN.
  CHECK_FALSE(image_header_size(write("far.tif", std::string("II*\0\xf0\xff\xff\xff", 8))));
  CHECK_FALSE(image_header_size(write("many.tif", std::string("II*\0\x08\0\0\0\xff\xff\x00\x01", 12))));
  CHECK_FALSE(image_header_size(write("long.jpg", std::string("\xFF\xD8\xFF\xE0\xFF\xF0\0\0", 8))));
  CHECK_FALSE(image_header_size(write("min.bmp", std::string("BM\0\0\0\0\0\0\0\0\0\0\0\0\x28\0\0\0\x01\0\0\0\0\0\0\x80", 26))));
  // A PNG with bytes after its IEND chunk (decoders ignore them) is whole.
  std::vector<unsigned char> png;
  REQUIRE(cv::imencode(".png", cv::Mat(4, 5, CV_8UC1, cv::Scalar(3)), png));
  const std::string trailing = write("trailing.png", std::string(png.begin(), png.end()) + std::string(4096, 'z'));
  CHECK_NOTHROW(check_whole_png(trailing));
  CHECK_THROWS_WITH(check_whole_png(write("cut.png", std::string(png.begin(), png.begin() + long(png.size()) - 12))),
                    Catch::Contains("the PNG ends before its IEND chunk"));
  fs::remove_all(dir);
}

TEST_CASE("an image declaring more pixels than the limit is refused before it is decoded", "[data]") {
  const fs::path dir = fs::temp_directory_path() / ("trainer_bomb_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string bomb = (dir / "bomb.png").string();
  std::ofstream(bomb, std::ios::binary) << png_header_only(30000, 30000);  // 900 M pixels in 57 bytes
  REQUIRE(image_header_size(bomb) == std::optional<cv::Size>(cv::Size(30000, 30000)));
  set_image_pixel_limit(89478485, "data.max_image_pixels");  // the default, whatever another test left
  CHECK_THROWS_WITH(read_image_file(bomb),
                    Catch::Contains("'" + bomb + "' declares 30000 x 30000 = 900000000 pixels, more than the 89478485 "
                                    "that data.max_image_pixels allows"));
  CHECK_THROWS_WITH(decode_image_pixels(bomb, 64, 64, 3), Catch::Contains("declares 30000 x 30000"));
  set_image_pixel_limit(1000, "--max-image-pixels");
  const cv::Mat image(40, 30, CV_8UC3, cv::Scalar(1));
  REQUIRE(cv::imwrite((dir / "small.png").string(), image));
  CHECK_THROWS_WITH(read_image_file((dir / "small.png").string()),
                    Catch::Contains("declares 30 x 40 = 1200 pixels, more than the 1000 that --max-image-pixels "
                                    "allows"));
  set_image_pixel_limit(89478485, "data.max_image_pixels");
  CHECK(read_image_file((dir / "small.png").string()).size() == cv::Size(30, 40));
  fs::remove_all(dir);
}

TEST_CASE("a file named as an image whose content is another format is refused before OpenCV decodes it",
          "[data]") {
  // OpenCV picks its decoder by the content: a DICOM file named .png went to GDCM, which aborted the process on
  // a damaged one (found by tests/fuzz).
  const fs::path dir = fs::temp_directory_path() / ("trainer_image_format_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string dicom = (dir / "scan.png").string();
  std::ofstream(dicom, std::ios::binary) << std::string(128, '\0') << "DICM" << std::string(64, '\x0e');
  CHECK_THROWS_WITH(read_image_file(dicom), Catch::Contains("cannot decode '" + dicom + "': it is no PNG, JPEG, TIFF "
                                                            "or BMP image"));
  const std::string bmp_dicom = (dir / "scan.bmp").string();  // a BMP's first bytes, DICOM's mark at byte 128
  std::ofstream(bmp_dicom, std::ios::binary) << "BM" << std::string(126, '\0') << "DICM" << std::string(64, 'x');
  CHECK_THROWS_WITH(read_image_file(bmp_dicom), Catch::Contains("it is no PNG, JPEG, TIFF or BMP image"));
  const std::string empty = (dir / "cut.png").string();  // a copy cut short
  std::ofstream(empty, std::ios::binary).flush();
  CHECK_THROWS_WITH(read_image_file(empty), Catch::Contains("cannot decode '" + empty + "': the file is empty (0 bytes)"));
  const std::string webp = (dir / "photo.jpg").string();
  std::ofstream(webp, std::ios::binary) << "RIFF\x10\0\0\0WEBPVP8 ";
  CHECK_THROWS_WITH(read_image_file(webp), Catch::Contains("it is no PNG, JPEG, TIFF or BMP image"));
  for (const char* ext : {".png", ".jpg", ".tif", ".bmp"}) {
    const std::string ok = (dir / (std::string("ok") + ext)).string();
    REQUIRE(cv::imwrite(ok, cv::Mat(3, 4, CV_8UC1, cv::Scalar(7))));
    CHECK(read_image_file(ok).size() == cv::Size(4, 3));
  }
  fs::remove_all(dir);
}

TEST_CASE("data.max_image_pixels: a count, or null for no limit", "[data][config]") {
  const std::string base = "model:\n  layers:\n    - {type: Input, shape: [8, 8, 1]}\n"
                           "data: {images: a, masks: b, max_image_pixels: ";
  const std::string training = "training: {epochs: 1}\n";
  CHECK(parse_config(base + "1000}\n" + training, "c.yaml").data.max_image_pixels == 1000);
  CHECK(parse_config(base + "null}\n" + training, "c.yaml").data.max_image_pixels == 0);
  CHECK(parse_config("model:\n  layers:\n    - {type: Input, shape: [8, 8, 1]}\ndata: {images: a, masks: b}\n" +
                         training, "c.yaml")
            .data.max_image_pixels == 89478485);
  CHECK_THROWS_WITH(parse_config(base + "0}\n" + training, "c.yaml"),
                    Catch::Contains("'max_image_pixels' must be in [1, "));
}
