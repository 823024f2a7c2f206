// Dataset loading: pairing by name, decoding of every supported pixel format
// into RGB float [0, 255], resizing, mask binarisation, and the errors (or
// warnings with data.skip_bad_files) for missing/corrupt files.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "data/dataset.h"
#include "data/held_samples.h"
#include "data/image_decode.h"
#include "data/image_files.h"
#include "data/image_header.h"
#include "dsb_testing.h"
#include "data_testing.h"

using namespace trainer;
using namespace trainer::testing;
namespace fs = std::filesystem;

namespace {

// A fresh folder with images/ and masks/ under the system temp dir, removed at the end.
struct TempData {
  fs::path root, images, masks;
  TempData() {
    static std::atomic<int> counter{0};
    root = fs::temp_directory_path() /
           ("trainer_test_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    images = root / "images";
    masks = root / "masks";
    fs::create_directories(images);
    fs::create_directories(masks);
  }
  ~TempData() { fs::remove_all(root); }
  DataOptions options(int h, int w, int c = 3) const {
    DataOptions o;
    o.images_dir = images.string();
    o.masks_dir = masks.string();
    o.height = h, o.width = w, o.channels = c;
    o.threads = 2;
    return o;
  }
};

void write(const fs::path& p, const cv::Mat& m) { REQUIRE(cv::imwrite(p.string(), m)); }

// An 8-bit gray mask of size w x h, all `v`.
cv::Mat flat_mask(int w, int h, int v = 255) { return cv::Mat(h, w, CV_8UC1, cv::Scalar(v)); }

std::string error_of(const DataOptions& o) {
  try {
    load_dataset(o);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

/// Image sample n of held images (data/held_samples.h) as float32, at (y, x, c).
float at(const Tensor& t, int n, int y, int x, int c) {
  const Shape& s = t.shape();
  std::vector<float> v(s.sample_numel());
  image_sample_to_float(t, n, v.data());
  return v[(size_t(y) * s.w + x) * s.c + c];
}

/// Mask sample n of held masks as float32 (kIgnoredPixel for an ignored pixel), at (y, x).
float mask_at(const Tensor& t, int n, int y, int x) {
  const Shape& s = t.shape();
  std::vector<float> v(s.sample_numel());
  mask_sample_to_float(t, n, v.data());
  return v[size_t(y) * s.w + x];
}

/// Every mask value of held masks, as float32.
std::vector<float> mask_values(const Tensor& t) {
  std::vector<float> all(t.numel());
  for (int n = 0; n < t.shape().n; ++n) mask_sample_to_float(t, n, all.data() + size_t(n) * t.shape().sample_numel());
  return all;
}

const std::string kShared = TRAINER_SOURCE_DIR "/../shared/data/dsb2018/flat";

}  // namespace

TEST_CASE("data: real DSB images decode as OpenCV reads them, in RGB order", "[data]") {
  TRAINER_REQUIRE_DSB();
  REQUIRE(fs::is_directory(kShared + "/train_im"));
  std::vector<std::string> all;
  for (const auto& e : fs::directory_iterator(kShared + "/train_im")) all.push_back(e.path().filename());
  std::sort(all.begin(), all.end());
  TempData d;
  std::vector<std::string> picked;  // three 256x256 images
  for (const auto& name : all) {
    cv::Mat m = cv::imread(kShared + "/train_im/" + name, cv::IMREAD_UNCHANGED);
    if (m.cols != 256 || m.rows != 256) continue;
    std::string stem = fs::path(name).stem();
    fs::copy_file(kShared + "/train_im/" + name, d.images / name);
    fs::copy_file(kShared + "/train_mask/" + stem + "_mask.png", d.masks / (stem + "_mask.png"));
    picked.push_back(name);
    if (picked.size() == 3) break;
  }
  REQUIRE(picked.size() == 3);

  Dataset ds = load_dataset(d.options(256, 256));
  CHECK(ds.names == picked);
  CHECK(ds.images.shape() == Shape{3, 256, 256, 3});
  CHECK(ds.masks.shape() == Shape{3, 256, 256, 1});
  for (int i = 0; i < 3; ++i) {
    cv::Mat bgr = cv::imread((d.images / picked[i]).string(), cv::IMREAD_COLOR);
    cv::Mat mask = cv::imread((d.masks / (fs::path(picked[i]).stem().string() + "_mask.png")).string(),
                              cv::IMREAD_GRAYSCALE);
    int wrong = 0, foreground = 0;
    std::vector<float> image(256 * 256 * 3), held_mask(256 * 256);
    image_sample_to_float(ds.images, i, image.data());
    mask_sample_to_float(ds.masks, i, held_mask.data());
    for (int y = 0; y < 256; ++y)
      for (int x = 0; x < 256; ++x) {
        cv::Vec3b p = bgr.at<cv::Vec3b>(y, x);
        for (int c = 0; c < 3; ++c) wrong += image[size_t((y * 256 + x) * 3 + c)] != float(p[2 - c]);
        wrong += held_mask[size_t(y * 256 + x)] != (mask.at<uint8_t>(y, x) > 127 ? 1.f : 0.f);
        foreground += mask.at<uint8_t>(y, x) > 127;
      }
    CHECK(wrong == 0);
    CHECK(foreground > 0);  // the masks do mark nuclei, so the comparison means something
  }

  // Downsized: masks stay exactly binary and cover about the same fraction.
  Dataset small = load_dataset(d.options(64, 96));
  CHECK(small.images.shape() == Shape{3, 64, 96, 3});
  double full = 0, part = 0;
  for (float v : mask_values(ds.masks)) full += v;
  for (float v : mask_values(small.masks)) {
    REQUIRE((v == 0.f || v == 1.f));
    part += v;
  }
  CHECK(part / small.masks.numel() == Approx(full / ds.masks.numel()).margin(0.02));
}

TEST_CASE("data: 16-bit, gray, RGBA, JPEG and TIFF files decode to RGB [0, 255]", "[data]") {
  TempData d;
  // a.png: 16-bit gray; values scale by 255/65535 and replicate to R, G, B.
  cv::Mat g16(2, 2, CV_16UC1);
  g16.at<uint16_t>(0, 0) = 0, g16.at<uint16_t>(0, 1) = 65535;
  g16.at<uint16_t>(1, 0) = 257, g16.at<uint16_t>(1, 1) = 1000;
  write(d.images / "a.png", g16);
  // 16-bit mask: > 32767 is foreground.
  cv::Mat m16(2, 2, CV_16UC1);
  m16.at<uint16_t>(0, 0) = 32767, m16.at<uint16_t>(0, 1) = 32768;
  m16.at<uint16_t>(1, 0) = 65535, m16.at<uint16_t>(1, 1) = 0;
  write(d.masks / "a_mask.png", m16);
  // b.png: 8-bit BGRA (10, 20, 30, alpha 40) -> RGB (30, 20, 10), alpha dropped.
  write(d.images / "b.png", cv::Mat(2, 2, CV_8UC4, cv::Scalar(10, 20, 30, 40)));
  // 8-bit mask: 127 is background, 128 foreground.
  cv::Mat m8 = (cv::Mat_<uint8_t>(2, 2) << 127, 128, 255, 0);
  write(d.masks / "b_mask.png", m8);
  // c.jpg: BGR (200, 100, 50), lossy; its mask is a white RGB PNG (different extension).
  write(d.images / "c.jpg", cv::Mat(2, 2, CV_8UC3, cv::Scalar(200, 100, 50)));
  write(d.masks / "c_mask.png", cv::Mat(2, 2, CV_8UC3, cv::Scalar(255, 255, 255)));
  // D.TIF: 16-bit BGR TIFF, upper-case extension; mask a TIFF too.
  write(d.images / "D.TIF", cv::Mat(2, 2, CV_16UC3, cv::Scalar(0, 32896, 65535)));
  write(d.masks / "D_mask.tiff", flat_mask(2, 2, 0));
  // A mask without an image is ignored.
  write(d.masks / "zzz_mask.png", flat_mask(2, 2));

  Dataset ds = load_dataset(d.options(2, 2));
  REQUIRE(ds.names == std::vector<std::string>{"D.TIF", "a.png", "b.png", "c.jpg"});
  const int D = 0, A = 1, B = 2, C = 3;
  // Held as uint16 for the 16-bit files, the 8-bit ones widened (B, C read back exactly below).
  CHECK(ds.images.dtype() == DType::U16);
  CHECK(ds.masks.dtype() == DType::U8);
  for (int c = 0; c < 3; ++c) {
    CHECK(at(ds.images, A, 0, 0, c) == 0.f);
    CHECK(at(ds.images, A, 0, 1, c) == Approx(255.f));
    CHECK(at(ds.images, A, 1, 0, c) == Approx(1.f));
    CHECK(at(ds.images, A, 1, 1, c) == Approx(1000 * 255.0 / 65535));
  }
  CHECK(mask_at(ds.masks, A, 0, 0) == 0.f);
  CHECK(mask_at(ds.masks, A, 0, 1) == 1.f);
  CHECK(mask_at(ds.masks, A, 1, 0) == 1.f);
  CHECK(mask_at(ds.masks, A, 1, 1) == 0.f);

  CHECK(at(ds.images, B, 1, 1, 0) == 30.f);
  CHECK(at(ds.images, B, 1, 1, 1) == 20.f);
  CHECK(at(ds.images, B, 1, 1, 2) == 10.f);
  CHECK(mask_at(ds.masks, B, 0, 0) == 0.f);
  CHECK(mask_at(ds.masks, B, 0, 1) == 1.f);
  CHECK(mask_at(ds.masks, B, 1, 0) == 1.f);
  CHECK(mask_at(ds.masks, B, 1, 1) == 0.f);

  CHECK(at(ds.images, C, 0, 0, 0) == Approx(50).margin(4));
  CHECK(at(ds.images, C, 0, 0, 1) == Approx(100).margin(4));
  CHECK(at(ds.images, C, 0, 0, 2) == Approx(200).margin(4));
  CHECK(mask_at(ds.masks, C, 0, 0) == 1.f);

  CHECK(at(ds.images, D, 0, 0, 0) == Approx(255.f));
  CHECK(at(ds.images, D, 0, 0, 1) == Approx(128.f));
  CHECK(at(ds.images, D, 0, 0, 2) == 0.f);
  CHECK(mask_at(ds.masks, D, 0, 0) == 0.f);

  // channels 1: BGRA (10, 20, 30) -> gray 0.299 R + 0.587 G + 0.114 B = 21.85, rounded by OpenCV.
  Dataset gray = load_dataset(d.options(2, 2, 1));
  CHECK(gray.images.shape() == Shape{4, 2, 2, 1});
  CHECK(at(gray.images, B, 0, 0, 0) == 22.f);
  CHECK(at(gray.images, A, 0, 1, 0) == Approx(255.f));
}

TEST_CASE("data: 0/1 masks and label images take every object as foreground", "[data]") {
  // With the half-maximum threshold alone these came out all background and
  // Trained silently on empty masks.
  TempData d;
  for (const char* name : {"a.png", "b.png", "c.png"}) write(d.images / name, cv::Mat(2, 2, CV_8UC3, cv::Scalar(9)));
  write(d.masks / "a_mask.png", (cv::Mat_<uint8_t>(2, 2) << 0, 1, 1, 0));  // 0/1, as numpy masks are often saved
  cv::Mat labels(2, 2, CV_16UC1);  // 16-bit labels 0..3, as DSB's instance masks
  labels.at<uint16_t>(0, 0) = 0, labels.at<uint16_t>(0, 1) = 1;
  labels.at<uint16_t>(1, 0) = 2, labels.at<uint16_t>(1, 1) = 3;
  write(d.masks / "b_mask.png", labels);
  // 0/255 with values at or below the threshold beside it: the threshold still rules.
  write(d.masks / "c_mask.png", (cv::Mat_<uint8_t>(2, 2) << 0, 100, 127, 255));
  // The log, where a folder mixing both kinds is warned about.
  std::ostringstream log;
  const std::shared_ptr<spdlog::logger> before = spdlog::default_logger();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  Dataset ds = load_dataset(d.options(2, 2));
  spdlog::set_default_logger(before);
  CHECK_THAT(log.str(), Catch::Contains("2 of 3 masks hold no value above half") &&
                            Catch::Contains("and 1 are thresholded"));
  const float expect[3][4] = {{0, 1, 1, 0}, {0, 1, 1, 1}, {0, 0, 0, 1}};
  for (int n = 0; n < 3; ++n)
    for (int k = 0; k < 4; ++k) {
      INFO(ds.names[size_t(n)] << " pixel " << k);
      CHECK(mask_at(ds.masks, n, k / 2, k % 2) == expect[n][k]);
    }
}

TEST_CASE("data: a mask drawn in the alpha channel is read from it, and masks that are all empty are warned about",
          "[data]") {
  // RGBA masks of black colour whose nuclei are in alpha (an annotation tool's export) read as
  // all background, and the run trained to dice 0 without a word.
  TempData d;
  for (const char* name : {"a.png", "b.png", "c.png"}) write(d.images / name, cv::Mat(2, 2, CV_8UC3, cv::Scalar(9)));
  cv::Mat alpha(2, 2, CV_8UC4, cv::Scalar(0, 0, 0, 0));
  alpha.at<cv::Vec4b>(0, 1)[3] = 255;
  write(d.masks / "a_mask.png", alpha);
  // A mask whose colour varies keeps the colour rule (alpha dropped): white on black, half-transparent.
  cv::Mat coloured(2, 2, CV_8UC4, cv::Scalar(0, 0, 0, 128));
  coloured.at<cv::Vec4b>(1, 0) = cv::Vec4b(255, 255, 255, 128);
  write(d.masks / "b_mask.png", coloured);
  // A shape in the alpha channel over red (BGR 0, 0, 255) everywhere: its alpha too (a colour
  // other than gray was taken as gray, all foreground).
  cv::Mat red(2, 2, CV_8UC4, cv::Scalar(0, 0, 255, 0));
  red.at<cv::Vec4b>(1, 1)[3] = 255;
  write(d.masks / "c_mask.png", red);
  const auto load = [&](std::string& log_text) {
    std::ostringstream log;
    const std::shared_ptr<spdlog::logger> before = spdlog::default_logger();
    spdlog::set_default_logger(
        std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
    Dataset ds = load_dataset(d.options(2, 2));
    spdlog::set_default_logger(before);
    log_text = log.str();
    return ds;
  };
  std::string log;
  const Dataset ds = load(log);
  const float expect[3][4] = {{0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}};
  for (int n = 0; n < 3; ++n)
    for (int k = 0; k < 4; ++k) {
      INFO(ds.names[size_t(n)] << " pixel " << k);
      CHECK(mask_at(ds.masks, n, k / 2, k % 2) == expect[n][k]);
    }
  CHECK_THAT(log, !Catch::Contains("is empty"));
  // Every mask empty: said, with the folder.
  for (const char* name : {"a_mask.png", "b_mask.png", "c_mask.png"}) write(d.masks / name, flat_mask(2, 2, 0));
  load(log);
  CHECK_THAT(log, Catch::Contains("every one of the 3 masks in '" + d.masks.string() + "' is empty") &&
                      Catch::Contains("dice and mean_iou read 1"));
}

TEST_CASE("data: images enlarged more than 4 times to the input are warned about", "[data]") {
  // A 1x1 image was enlarged to the input without a word.
  TempData d;
  write(d.images / "a.png", cv::Mat(1, 1, CV_8UC3, cv::Scalar(9)));
  write(d.images / "b.png", cv::Mat(8, 8, CV_8UC3, cv::Scalar(9)));
  write(d.masks / "a_mask.png", cv::Mat(1, 1, CV_8UC1, cv::Scalar(255)));
  write(d.masks / "b_mask.png", cv::Mat(8, 8, CV_8UC1, cv::Scalar(255)));
  std::ostringstream log;
  const std::shared_ptr<spdlog::logger> before = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  (void)load_dataset(d.options(8, 8));
  spdlog::set_default_logger(before);
  CHECK_THAT(log.str(), Catch::Contains("1 of 2 images (the first: '" + (d.images / "a.png").string() +
                                        "') are less than a quarter of the input's 8x8 wide or high"));
}

TEST_CASE("data: images resize with INTER_AREA, masks with INTER_NEAREST", "[data]") {
  TempData d;
  // 8x8 image and mask of 2x2 blocks; at 4x4 each output pixel is one block.
  cv::Mat img(8, 8, CV_8UC3), mask(8, 8, CV_8UC1);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) {
      int b = (y / 2) * 4 + x / 2;  // block index 0..15
      img.at<cv::Vec3b>(y, x) = cv::Vec3b(uint8_t(b), uint8_t(10 * b), uint8_t(x + y));  // BGR
      mask.at<uint8_t>(y, x) = b % 3 == 0 ? 255 : 0;
    }
  write(d.images / "p.png", img);
  write(d.masks / "p_mask.png", mask);
  Dataset ds = load_dataset(d.options(4, 4));
  REQUIRE(ds.images.shape() == Shape{1, 4, 4, 3});
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      int b = y * 4 + x;
      CHECK(at(ds.images, 0, y, x, 2) == Approx(b));       // B channel is last in RGB
      CHECK(at(ds.images, 0, y, x, 1) == Approx(10 * b));
      CHECK(at(ds.images, 0, y, x, 0) == Approx(2 * (y + x) + 1));  // mean of x+y over the block
      CHECK(mask_at(ds.masks, 0, y, x) == (b % 3 == 0 ? 1.f : 0.f));
    }
  // Upsizing keeps masks binary too.
  Dataset big = load_dataset(d.options(13, 11));
  CHECK(big.masks.shape() == Shape{1, 13, 11, 1});
  for (float v : mask_values(big.masks)) REQUIRE((v == 0.f || v == 1.f));
}

TEST_CASE("data: images and masks may share one folder", "[data]") {
  TempData d;
  write(d.images / "a.png", cv::Mat(3, 3, CV_8UC3, cv::Scalar(1, 2, 3)));
  write(d.images / "a_mask.png", flat_mask(3, 3));
  DataOptions o = d.options(3, 3);
  o.masks_dir = o.images_dir;
  Dataset ds = load_dataset(o);
  CHECK(ds.names == std::vector<std::string>{"a.png"});
  CHECK(mask_at(ds.masks, 0, 0, 0) == 1.f);
}

TEST_CASE("data: the sample is held as it is stored, a byte per channel and one per mask pixel", "[data]") {
  DataOptions o;
  o.images_dir = TRAINER_SOURCE_DIR "/data/sample/images";
  o.masks_dir = TRAINER_SOURCE_DIR "/data/sample/masks";
  o.height = o.width = 128;
  o.channels = 3;
  const Dataset ds = load_dataset(o);
  REQUIRE(ds.size() == 40);
  CHECK(ds.images.dtype() == DType::U8);
  CHECK(ds.masks.dtype() == DType::U8);
  // docs/data.md: N x H x W x (C + 1) bytes for 8-bit files, 2.6 MB here (float32 held 10.5 MB).
  CHECK(ds.images.bytes() + ds.masks.bytes() == size_t(40) * 128 * 128 * (3 + 1));
  // A sample holds the file resized as it is stored (8-bit, INTER_AREA), in RGB order, and reads back as
  // decode_image gives it, which predict and evaluate use.
  cv::Mat rgb, small;
  cv::cvtColor(cv::imread(o.images_dir + "/" + ds.names[5], cv::IMREAD_COLOR), rgb, cv::COLOR_BGR2RGB);
  cv::resize(rgb, small, cv::Size(128, 128), 0, 0, cv::INTER_AREA);
  REQUIRE(small.isContinuous());
  CHECK(std::memcmp(small.data, ds.images.raw_sample(5), ds.images.sample_bytes()) == 0);
  std::vector<float> decoded(128 * 128 * 3), held(decoded.size());
  decode_image(o.images_dir + "/" + ds.names[5], 128, 128, 3, decoded.data());
  image_sample_to_float(ds.images, 5, held.data());
  CHECK(held == decoded);
  // An 8-bit first file and a 16-bit later one: the images become uint16, the 8-bit one widened by 257,
  // and both read back on one scale.
  TempData mixed;
  write(mixed.images / "a.png", cv::Mat(2, 2, CV_8UC1, cv::Scalar(200)));
  write(mixed.images / "b.png", cv::Mat(2, 2, CV_16UC1, cv::Scalar(1000)));
  for (const char* name : {"a", "b"}) write(mixed.masks / (std::string(name) + "_mask.png"), flat_mask(2, 2));
  const Dataset both = load_dataset(mixed.options(2, 2, 1));
  CHECK(both.images.dtype() == DType::U16);
  CHECK(static_cast<const uint16_t*>(both.images.raw_sample(0))[0] == 200 * 257);
  CHECK(at(both.images, 0, 1, 1, 0) == 200.f);
  CHECK(at(both.images, 1, 1, 1, 0) == Approx(1000 * 255.0 / 65535));
  // Class masks beyond 255 classes take 16 bits; the ignored pixel survives either way.
  CHECK(mask_storage(0) == DType::U8);
  CHECK(mask_storage(255) == DType::U8);
  CHECK(mask_storage(256) == DType::U16);
  for (DType t : {DType::U8, DType::U16}) {
    Tensor masks(Shape{1, 1, 4, 1});
    masks.set_dtype(t);
    const float values[4] = {0.f, 1.f, 254.f, kIgnoredPixel};
    store_mask_sample(values, masks, 0);
    std::vector<float> back(4);
    mask_sample_to_float(masks, 0, back.data());
    CHECK(back == std::vector<float>(values, values + 4));
  }
}

TEST_CASE("data: thread count does not change the result", "[data]") {
  TempData d;
  for (int i = 0; i < 12; ++i) {
    std::string stem = "im" + std::to_string(10 + i);
    write(d.images / (stem + ".png"), cv::Mat(5, 7, CV_8UC3, cv::Scalar(i, 2 * i, 3 * i)));
    write(d.masks / (stem + "_mask.png"), flat_mask(7, 5, i % 2 ? 255 : 0));
  }
  DataOptions o = d.options(5, 7);
  o.threads = 1;
  Dataset one = load_dataset(o);
  o.threads = 5;
  Dataset five = load_dataset(o);
  REQUIRE(one.size() == 12);
  CHECK(one.names == five.names);
  REQUIRE(one.images.dtype() == five.images.dtype());
  CHECK(std::memcmp(one.images.raw(), five.images.raw(), one.images.bytes()) == 0);
  CHECK(mask_values(one.masks) == mask_values(five.masks));
  CHECK(at(five.images, 7, 4, 6, 0) == 21.f);  // sample 7 is im17: R = 3 * 7
}

TEST_CASE("data: missing, empty, unmatched and corrupt inputs are explained", "[data]") {
  TempData d;
  DataOptions o = d.options(4, 4);
  o.config_path = "cfg.yaml";

  SECTION("missing folder") {
    o.images_dir = (d.root / "nope").string();
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("cfg.yaml: data.images: '" + o.images_dir +
                                                      "' does not exist; fix the path"));
  }
  SECTION("a file given as the folder") {
    write(d.root / "file.png", flat_mask(4, 4));
    o.images_dir = (d.root / "file.png").string();
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("data.images: '" + o.images_dir + "' is a file, not a folder"));
  }
  SECTION("missing masks folder") {
    write(d.images / "a.png", flat_mask(4, 4));
    o.masks_dir = (d.root / "nomasks").string();
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("data.masks: '" + o.masks_dir + "' does not exist"));
  }
  SECTION("empty folder") {
    std::ofstream(d.images / "notes.txt") << "not an image";
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("cfg.yaml: data.images: no images in '" + o.images_dir +
                                                      "' (looked for .png, .jpg, .jpeg, .tif, .tiff"));
    CHECK_THAT(error_of(o), !Catch::Matchers::Contains("Data Science Bowl"));
  }
  SECTION("the competition's layout given as the image folder") {
    fs::create_directories(d.images / "id1" / "images");
    fs::create_directories(d.images / "id1" / "masks");
    write(d.images / "id1" / "images" / "id1.png", flat_mask(4, 4));
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("but its folders hold the 2018 Data Science Bowl layout") &&
                                Catch::Matchers::Contains("dsb_to_flat -i '" + o.images_dir + "'"));
  }
  SECTION("two images of one name") {
    // H00.png and h00.jpg trained against one mask, unsaid.
    write(d.images / "h00.png", flat_mask(4, 4));
    write(d.images / "h00.jpg", flat_mask(4, 4));
    write(d.masks / "h00_mask.png", flat_mask(4, 4));
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("data.images: 'h00.jpg' and 'h00.png' in '" + o.images_dir +
                                                      "' have one name, 'h00', so both would take the mask "
                                                      "h00_mask.*"));
  }
  SECTION("images in subfolders") {
    fs::create_directories(d.images / "plate1");
    write(d.images / "plate1" / "a.png", flat_mask(4, 4));
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("no images in '" + o.images_dir + "'") &&
                                Catch::Matchers::Contains("but its subfolders hold images (e.g. '" +
                                                          (d.images / "plate1" / "a.png").string() + "')"));
  }
  SECTION("images without masks") {
    for (int i = 0; i < 14; ++i) write(d.images / ("x" + std::to_string(10 + i) + ".png"), flat_mask(4, 4));
    write(d.masks / "x10_mask.png", flat_mask(4, 4));
    std::string e = error_of(o);
    CHECK_THAT(e, Catch::Matchers::Contains("13 of 14 images have no mask in '" + o.masks_dir + "'"));
    CHECK_THAT(e, Catch::Matchers::Contains("x11.png (expected " + (d.masks / "x11_mask.png").string() + ")"));
    CHECK_THAT(e, Catch::Matchers::Contains("x20.png (expected"));
    CHECK_THAT(e, Catch::Matchers::Contains("; and 3 more"));
    CHECK_THAT(e, Catch::Matchers::Contains("data.skip_bad_files: true"));
    CHECK_THAT(e, !Catch::Matchers::Contains("x21.png"));  // only the first 10 are listed
  }
  SECTION("masks named as their images, with the default suffix") {
    for (const char* stem : {"a", "b", "c"}) {
      write(d.images / (std::string(stem) + ".png"), flat_mask(4, 4));
      write(d.masks / (std::string(stem) + ".png"), flat_mask(4, 4));
    }
    const std::string e = error_of(o);
    CHECK_THAT(e, Catch::Matchers::Contains("3 of 3 images have no mask") &&
                      Catch::Matchers::Contains("(3 of them have a file of their own name in the mask folder: if the "
                                                "masks are named as their images, set data.mask_suffix: \"\")"));
    o.mask_suffix = "";
    CHECK_NOTHROW(load_dataset(o));
  }
  SECTION("the two folders swapped: every image is named like a mask") {
    for (const char* stem : {"a", "b"}) {
      write(d.images / (std::string(stem) + "_mask.png"), flat_mask(4, 4));
      write(d.masks / (std::string(stem) + ".png"), flat_mask(4, 4));
    }
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("2 of 2 images have no mask") &&
                                Catch::Matchers::Contains("(every one of them is named like a mask, <stem>_mask: are "
                                                          "data.images and data.masks swapped?)"));
    write(d.images / "c.png", flat_mask(4, 4));  // one image named as images are: no such hint
    CHECK_THAT(error_of(o), !Catch::Matchers::Contains("swapped"));
  }
  SECTION("images without masks in the one folder of both: no such hint (each image would be its own mask)") {
    for (const char* stem : {"a", "b"}) write(d.images / (std::string(stem) + ".png"), flat_mask(4, 4));
    o.masks_dir = o.images_dir;
    const std::string e = error_of(o);
    CHECK_THAT(e, Catch::Matchers::Contains("2 of 2 images have no mask") &&
                      !Catch::Matchers::Contains("file of their own name"));
  }
  SECTION("one folder of both without a mask suffix: each image would be its own mask") {
    // Every image paired with itself, and the run trained on it.
    write(d.images / "a.png", flat_mask(4, 4));
    o.masks_dir = o.images_dir;
    o.mask_suffix = "";
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("cfg.yaml: data.masks: '" + o.images_dir + "' is the images' "
                                                      "folder and data.mask_suffix is empty, so each image would be "
                                                      "its own mask"));
  }
  SECTION("a link to nothing, or to itself, named as an image") {
    // Such an entry was dropped without a word, or failed naming only the folder.
    write(d.images / "a.png", flat_mask(4, 4));
    write(d.masks / "a_mask.png", flat_mask(4, 4));
    fs::create_symlink(d.images / "gone.png", d.images / "b.png");
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("cfg.yaml: data.images: '" + (d.images / "b.png").string() +
                                                      "' is not a file that can be read (") &&
                                Catch::Matchers::Contains("a link to nothing or to itself?): fix or remove it"));
    fs::remove(d.images / "b.png");
    fs::create_symlink(d.images / "b.png", d.images / "b.png");
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("'" + (d.images / "b.png").string() + "' is not a file that "
                                                      "can be read (Too many levels of symbolic links"));
    fs::remove(d.images / "b.png");
    fs::create_symlink(d.masks / "gone.txt", d.images / "notes.txt");  // not named as an image: ignored
    fs::create_directories(d.images / "more.png");                     // a folder: ignored
    CHECK(load_dataset(o).names == std::vector<std::string>{"a.png"});
  }
  SECTION("wrong mask suffix matches nothing") {
    write(d.images / "a.png", flat_mask(4, 4));
    write(d.masks / "a-mask.png", flat_mask(4, 4));
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("a.png (expected " + (d.masks / "a_mask.png").string()));
  }
  SECTION("corrupt file") {
    write(d.images / "a.png", flat_mask(4, 4));
    write(d.masks / "a_mask.png", flat_mask(4, 4));
    std::ofstream(d.images / "x.png", std::ios::binary) << "\x89PNG garbage, not an image";
    write(d.masks / "x_mask.png", flat_mask(4, 4));
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("1 of 2 image/mask pairs cannot be used: cannot decode '" +
                                                      (d.images / "x.png").string() + "' (corrupt"));
  }
  SECTION("a header claiming 100000 x 100000 pixels") {
    // From fuzzing: OpenCV's own multi-line assertion text was passed on.
    write(d.images / "big.png", flat_mask(8, 8));
    write(d.masks / "big_mask.png", flat_mask(8, 8));
    std::string png;
    {
      std::ifstream in(d.images / "big.png", std::ios::binary);
      png.assign(std::istreambuf_iterator<char>(in), {});
    }
    REQUIRE(png.substr(12, 4) == "IHDR");
    for (int k = 0; k < 2; ++k)  // width, height = 100000, big-endian
      for (int b = 0; b < 4; ++b) png[size_t(16 + 4 * k + b)] = char((100000u >> (24 - 8 * b)) & 0xff);
    uint32_t crc = 0xffffffffu;  // PNG's CRC-32 of the chunk type and data
    for (size_t i = 12; i < 29; ++i) {
      crc ^= uint8_t(png[i]);
      for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    crc = ~crc;
    for (int b = 0; b < 4; ++b) png[size_t(29 + b)] = char((crc >> (24 - 8 * b)) & 0xff);
    std::ofstream(d.images / "big.png", std::ios::binary) << png;
    // Our header check refuses it first; with no limit of ours, OpenCV's own check still gives one line.
    std::string e = error_of(o);
    CHECK_THAT(e, Catch::Matchers::Contains("'" + (d.images / "big.png").string() + "' declares 100000 x 100000"));
    CHECK(e.find('\n') == std::string::npos);
    set_image_pixel_limit(0, "data.max_image_pixels");
    e = error_of(o);
    set_image_pixel_limit(89478485, "data.max_image_pixels");
    CHECK_THAT(e, Catch::Matchers::Contains("cannot decode '" + (d.images / "big.png").string() +
                                            "': its header gives a size OpenCV refuses to read"));
    CHECK(e.find('\n') == std::string::npos);
  }
  SECTION("mask of another size") {
    write(d.images / "a.png", flat_mask(8, 8));
    write(d.masks / "a_mask.png", flat_mask(8, 4));
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("mask '" + (d.masks / "a_mask.png").string() +
                                                      "' is 8x4 but image '" + (d.images / "a.png").string() +
                                                      "' is 8x8"));
  }
}

TEST_CASE("data: skip_bad_files drops bad pairs with a warning and keeps the rest in order", "[data]") {
  TempData d;
  DataOptions o = d.options(3, 3);
  o.skip_bad_files = true;
  for (int i = 1; i <= 5; ++i) {
    std::string stem = "s" + std::to_string(i);
    write(d.images / (stem + ".png"), cv::Mat(3, 3, CV_8UC3, cv::Scalar(0, 0, 10 * i)));  // R = 10 i
    if (i != 4) write(d.masks / (stem + "_mask.png"), flat_mask(3, 3, i == 5 ? 255 : 0));
  }
  std::ofstream(d.images / "s2.png", std::ios::binary | std::ios::trunc) << "garbage";
  Dataset ds = load_dataset(o);
  CHECK(ds.names == std::vector<std::string>{"s1.png", "s3.png", "s5.png"});
  REQUIRE(ds.images.shape() == Shape{3, 3, 3, 3});
  CHECK(at(ds.images, 0, 2, 2, 0) == 10.f);
  CHECK(at(ds.images, 1, 2, 2, 0) == 30.f);
  CHECK(at(ds.images, 2, 2, 2, 0) == 50.f);
  CHECK(mask_at(ds.masks, 2, 0, 0) == 1.f);
  CHECK(mask_at(ds.masks, 1, 0, 0) == 0.f);

  SECTION("nothing left is an error") {
    for (int i : {1, 3, 5}) std::ofstream(d.images / ("s" + std::to_string(i) + ".png"), std::ios::trunc) << "bad";
    CHECK_THAT(error_of(o), Catch::Matchers::Contains("no usable image/mask pair is left"));
  }
}

TEST_CASE("hidden files (macOS's ._name.tif) are not images", "[data]") {
  // The AppleDouble file macOS writes beside each file copied from its disks failed training
  // ("has no mask") and predict ("cannot decode").
  TempData d;
  write(d.images / "a.png", cv::Mat(4, 4, CV_8UC3, cv::Scalar(9, 9, 9)));
  write(d.masks / "a_mask.png", flat_mask(4, 4));
  std::ofstream(d.images / "._a.png") << "AppleDouble";
  std::ofstream(d.images / ".hidden.png") << "not an image";
  CHECK(images_in_folder(d.images.string(), "data.images") == std::vector<std::string>{(d.images / "a.png").string()});
  CHECK(list_image_files(d.images.string(), "--input").size() == 1);
  CHECK(load_dataset(d.options(4, 4)).size() == 1);
}

TEST_CASE("an 8-bit label image with labels above 127 is warned about, naming it", "[data]") {
  // 179 nuclei labelled 1..179 in an 8-bit mask; those at or below 127 became background, silently.
  TempData d;
  const int w = 4 * 180, h = 8;
  cv::Mat labels(h, w, CV_8UC1, cv::Scalar(0));
  for (int x = 4; x < w; ++x) labels.col(x).setTo(x / 4);  // labels 1..179, 4 pixels wide each
  // A binary mask of thin anti-aliased outlines shrunk (INTER_AREA): values between 0 and 255, but no plateaus.
  cv::Mat outline(4 * h, 4 * w, CV_8UC1, cv::Scalar(0)), shrunk;
  for (int x = 10; x < 4 * w; x += 40) cv::circle(outline, {x, 2 * h}, 12, cv::Scalar(255), 3, cv::LINE_AA);
  cv::resize(outline, shrunk, {w, h}, 0, 0, cv::INTER_AREA);
  double brightest = 0;
  cv::minMaxLoc(shrunk, nullptr, &brightest);
  REQUIRE(brightest > 127);  // thresholded, so looked at
  REQUIRE(cv::countNonZero((shrunk > 0) & (shrunk <= 127)) >= 16);
  for (const char* name : {"a", "b", "c"}) write(d.images / (std::string(name) + ".png"), cv::Mat(h, w, CV_8UC3));
  write(d.masks / "a_mask.png", labels);
  write(d.masks / "b_mask.png", flat_mask(w, h));  // 0/255: fine
  write(d.masks / "c_mask.png", shrunk);
  std::ostringstream log;
  const std::shared_ptr<spdlog::logger> before = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  const Dataset ds = load_dataset(d.options(h, w));
  spdlog::set_default_logger(before);
  CHECK(ds.size() == 3);
  CHECK_THAT(log.str(), Catch::Contains("1 of 3 masks (the first: '" + (d.masks / "a_mask.png").string() +
                                        "') hold areas of one value at or below half"));
}

TEST_CASE("16-bit images of 12-bit camera data are warned about, with the Rescaling scale for their range",
          "[data]") {
  // 12-bit values in 16-bit TIFFs reached 16 of 255, and nothing said so.
  TempData d;
  write(d.images / "a.tif", cv::Mat(4, 4, CV_16UC1, cv::Scalar(4000)));
  write(d.masks / "a_mask.png", flat_mask(4, 4));
  std::ostringstream log;
  const std::shared_ptr<spdlog::logger> before = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  load_dataset(d.options(4, 4, 1));
  write(d.images / "a.tif", cv::Mat(4, 4, CV_16UC1, cv::Scalar(40000)));  // the full range: nothing said
  load_dataset(d.options(4, 4, 1));
  write(d.images / "a.tif", cv::Mat(4, 4, CV_16UC1, cv::Scalar(1000)));  // 10-bit: its own scale
  load_dataset(d.options(4, 4, 1));
  spdlog::set_default_logger(before);
  CHECK_THAT(log.str(), Catch::Contains("the 1 16-bit image(s) hold values up to 4000 of 65535 (12-bit data?): "
                                        "read as value x 255 / 65535 they reach only 15.6 of 255") &&
                            Catch::Contains("Rescaling layer scale 0.0627595 (= 65535 / (255 x 4095))"));
  CHECK(log.str().find("40000") == std::string::npos);
  CHECK_THAT(log.str(), Catch::Contains("(10-bit data?)") && Catch::Contains("(= 65535 / (255 x 1023))"));
}

TEST_CASE("a multi-page TIFF (a z-stack) is warned about: only its first page is read", "[data]") {
  // A two-channel hyperstack trained on its first channel, silently.
  TempData d;
  const std::vector<cv::Mat> pages = {cv::Mat(4, 4, CV_8UC1, cv::Scalar(10)), cv::Mat(4, 4, CV_8UC1, cv::Scalar(200))};
  REQUIRE(cv::imwritemulti((d.images / "stack.tif").string(), pages));
  write(d.masks / "stack_mask.png", flat_mask(4, 4));
  REQUIRE(tiff_pages((d.images / "stack.tif").string()) == 2);
  std::ostringstream log;
  const std::shared_ptr<spdlog::logger> before = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  const Dataset ds = load_dataset(d.options(4, 4, 1));
  spdlog::set_default_logger(before);
  CHECK(at(ds.images, 0, 0, 0, 0) == 10.f);  // the first page
  CHECK_THAT(log.str(), Catch::Contains("1 image(s) (the first: '" + (d.images / "stack.tif").string() +
                                        "') are TIFFs of several pages"));
}
