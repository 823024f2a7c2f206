// Tests of data_tools/preview and lib/viz/preview: on the embedded sample the
// grid has the documented layout, the mask overlay changes exactly the mask's
// pixels, a checkpoint adds a prediction panel, and user errors exit with 2.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <vector>

#include "data/image_decode.h"
#include "process_testing.h"
#include "viz/preview.h"

namespace {

namespace fs = std::filesystem;
using trainer::viz::letterbox_rect;
using trainer::viz::preview_layout;
using namespace trainer::testing;

const std::string kSample = std::string(TRAINER_SOURCE_DIR) + "/data/sample";

Run preview(const std::string& args, const fs::path& dir) { return run(PREVIEW_BINARY, args, dir); }

std::string sample_flags() { return "--images " + kSample + "/images --masks " + kSample + "/masks"; }

// The sample's image files in name order (the order preview takes them).
std::vector<fs::path> sample_images() {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(kSample + "/images")) v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

fs::path mask_of(const fs::path& image) { return fs::path(kSample) / "masks" / (image.stem().string() + "_mask.png"); }

// The image as the trainer decodes it, resized to size, as 8-bit BGR.
cv::Mat raw_resized(const fs::path& image, cv::Size size) {
  std::vector<float> rgb(size_t(size.area()) * 3);
  trainer::decode_image(image.string(), size.height, size.width, 3, rgb.data());
  cv::Mat out;
  cv::Mat(size, CV_32FC3, rgb.data()).convertTo(out, CV_8UC3);
  cv::cvtColor(out, out, cv::COLOR_RGB2BGR);
  return out;
}

// The mask as the trainer decodes it, resized to size: 0/1 as 8-bit.
cv::Mat mask_resized(const fs::path& mask, cv::Size size) {
  std::vector<float> m(size_t(size.area()));
  trainer::decode_mask(mask.string(), size.height, size.width, m.data());
  cv::Mat out;
  cv::Mat(size, CV_32FC1, m.data()).convertTo(out, CV_8UC1);
  return out;
}

// Pixels (where sel != 0) at which a and b differ in any channel, and the number selected.
std::pair<int, int> differing(const cv::Mat& a, const cv::Mat& b, const cv::Mat& sel) {
  int diff = 0, total = 0;
  for (int y = 0; y < a.rows; ++y)
    for (int x = 0; x < a.cols; ++x)
      if (sel.at<uint8_t>(y, x)) {
        ++total;
        diff += a.at<cv::Vec3b>(y, x) != b.at<cv::Vec3b>(y, x);
      }
  return {diff, total};
}

// A two-level U-Net (width 8) at 64x64 on the sample, trained for one epoch by the trainer binary.
fs::path train_one_epoch(const fs::path& dir) {
  const std::string yaml = trainer::testing::sample_unet_config(dir / "run", "  epochs: 1\n  batch_size: 8\n");
  std::ofstream(dir / "unet.yaml") << yaml;
  const Run r = run(TRAINER_BINARY, "--config " + (dir / "unet.yaml").string() + " --gpus cpu", dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE(fs::exists(dir / "run" / "final.h5"));
  return dir / "run" / "final.h5";
}

}  // namespace

TEST_CASE("preview layout and letterbox follow the documented formulas", "[preview]") {
  // README: n = 4 at size 192 is 396 x 436 (one panel) and 788 x 436 (two).
  CHECK(preview_layout(4, 1, 192).grid() == cv::Size(2 * 192 + 3 * 4, 2 * (192 + 20) + 3 * 4));
  CHECK(preview_layout(4, 2, 192).grid() == cv::Size(2 * (2 * 192 + 4) + 3 * 4, 2 * (192 + 20) + 3 * 4));
  const auto five = preview_layout(5, 1, 50);  // 3 columns, 2 rows
  CHECK(five.grid() == cv::Size(3 * 50 + 4 * 4, 2 * 70 + 3 * 4));
  CHECK(five.panel(4, 0) == cv::Rect(4 + 54, 4 + 74, 50, 50));
  // 320 x 256 at 192: scale 0.6 -> 192 x 154, (192 - 154) / 2 = 19 rows above.
  CHECK(letterbox_rect({320, 256}, 192) == cv::Rect(0, 19, 192, 154));
  CHECK(letterbox_rect({256, 256}, 192) == cv::Rect(0, 0, 192, 192));
  CHECK(letterbox_rect({1, 1000}, 100) == cv::Rect(49, 0, 1, 100));
}

TEST_CASE("preview of the sample: grid size, captions, and the overlay changes the mask's pixels only", "[preview]") {
  TempDir dir("test_preview");
  const fs::path out = dir.root / "grid.png";
  const Run r = preview(sample_flags() + " --count 4 --output " + out.string(), dir.root);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const cv::Mat grid = cv::imread(out.string(), cv::IMREAD_COLOR);
  const auto layout = preview_layout(4, 1, 192);
  REQUIRE(grid.size() == layout.grid());

  const std::vector<fs::path> images = sample_images();
  for (int i = 0; i < 4; ++i) {
    INFO("tile " << i << ": " << images[size_t(i)]);
    const cv::Mat file = cv::imread(images[size_t(i)].string(), cv::IMREAD_UNCHANGED);
    const cv::Rect fit = letterbox_rect(file.size(), 192);
    const cv::Mat shown = grid(layout.panel(i, 0))(fit);
    const cv::Mat raw = raw_resized(images[size_t(i)], fit.size());
    const cv::Mat mask = mask_resized(mask_of(images[size_t(i)]), fit.size());
    // Outside the mask: the image exactly; inside: (nearly) every pixel tinted green.
    const auto [changed_outside, outside] = differing(shown, raw, mask == 0);
    const auto [changed_inside, inside] = differing(shown, raw, mask);
    REQUIRE(inside > 100);
    CHECK(outside > 0);
    CHECK(changed_outside == 0);
    CHECK(changed_inside > 0.95 * inside);
    cv::Scalar in_mean = cv::mean(shown, mask), raw_mean = cv::mean(raw, mask);
    CHECK(in_mean[1] - raw_mean[1] > 40);  // green channel up
    // The caption strip holds text (light pixels on the dark background).
    cv::Mat strip;
    cv::cvtColor(grid(layout.caption(i, 0)), strip, cv::COLOR_BGR2GRAY);
    CHECK(cv::countNonZero(strip > 150) > 50);
  }
  // The gaps between tiles are background.
  CHECK(grid.at<cv::Vec3b>(1, 1) == cv::Vec3b(40, 40, 40));
  CHECK(grid.at<cv::Vec3b>(100, 4 + 192 + 1) == cv::Vec3b(40, 40, 40));
}

TEST_CASE("preview with a checkpoint shows the prediction beside the mask", "[preview]") {
  TempDir dir("test_preview");
  const fs::path ckpt = train_one_epoch(dir.root);
  const fs::path out = dir.root / "pred.png";
  const Run r = preview(sample_flags() + " --count 4 --size 64 --checkpoint " + ckpt.string() +
                            " --threshold 0.3 --output " + out.string(),
                        dir.root);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const cv::Mat grid = cv::imread(out.string(), cv::IMREAD_COLOR);
  const auto layout = preview_layout(4, 2, 64);
  REQUIRE(grid.size() == layout.grid());
  const std::vector<fs::path> images = sample_images();
  for (int i = 0; i < 4; ++i) {
    INFO("tile " << i);
    const cv::Rect fit = letterbox_rect(cv::imread(images[size_t(i)].string(), cv::IMREAD_UNCHANGED).size(), 64);
    const cv::Mat raw = raw_resized(images[size_t(i)], fit.size());
    const cv::Mat left = grid(layout.panel(i, 0))(fit), right = grid(layout.panel(i, 1))(fit);
    const cv::Mat all(fit.size(), CV_8UC1, cv::Scalar(1));
    // Left: the true mask in green, as without a checkpoint.
    CHECK(differing(left, raw, all).first > 0);
    // Right: the same image; wherever it differs, the tint is magenta (green
    // down, blue and red not down), never the mask's green.
    int wrong_tint = 0;
    for (int y = 0; y < raw.rows; ++y)
      for (int x = 0; x < raw.cols; ++x) {
        const cv::Vec3b a = right.at<cv::Vec3b>(y, x), b = raw.at<cv::Vec3b>(y, x);
        if (a != b && (a[1] > b[1] || a[0] + 1 < b[0] || a[2] + 1 < b[2])) ++wrong_tint;
      }
    CHECK(wrong_tint == 0);
    CHECK(differing(left, right, all).first > 0);
    cv::Mat strip;
    cv::cvtColor(grid(layout.caption(i, 1)), strip, cv::COLOR_BGR2GRAY);
    CHECK(cv::countNonZero(strip > 150) > 50);  // "prediction, IoU ..."
  }
}

TEST_CASE("preview: user errors exit with 2, name the flag or file, and write nothing", "[preview]") {
  TempDir dir("test_preview");
  const fs::path out = dir.root / "grid.png";
  const std::string o = " --output " + out.string();
  fs::create_directories(dir.root / "images");
  fs::create_directories(dir.root / "masks");
  fs::copy_file(sample_images()[0], dir.root / "images" / "a.png");
  std::ofstream(dir.root / "images" / "b.png") << "not a png";
  fs::copy_file(mask_of(sample_images()[0]), dir.root / "masks" / "a_mask.png");
  fs::copy_file(mask_of(sample_images()[0]), dir.root / "masks" / "b_mask.png");
  std::ofstream(dir.root / "not_a_checkpoint.h5") << "hello";
  const std::string own = "--images " + (dir.root / "images").string() + " --masks " + (dir.root / "masks").string();

  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--images " + (dir.root / "nope").string() + " --masks " + kSample + "/masks" + o,
       "--images: '" + (dir.root / "nope").string() + "' does not exist"},
      {"--images " + kSample + "/images --masks " + (dir.root / "images").string() + o, "have no mask in"},
      {sample_flags() + " --mask-suffix _m" + o, "--mask-suffix"},
      {sample_flags() + " --count 0" + o, "--count 0: must be at least 1"},
      {sample_flags() + " --size 8" + o, "--size 8: must be in 32..2048"},
      {sample_flags() + " --threshold 0.5" + o, "--checkpoint"},  // --threshold needs --checkpoint
      {sample_flags() + " --checkpoint " + (dir.root / "not_a_checkpoint.h5").string() + " --threshold 1.5" + o,
       "--threshold 1.5"},
      {sample_flags() + " --checkpoint " + (dir.root / "not_a_checkpoint.h5").string() + o,
       (dir.root / "not_a_checkpoint.h5").string()},
      {sample_flags() + " --output " + (dir.root / "no" / "grid.png").string(),
       "--output: folder '" + (dir.root / "no").string() + "' of"},
      {own + " --count 2" + o, (dir.root / "images" / "b.png").string()},
  };
  for (const Case& c : cases) {
    const Run r = preview(c.args, dir.root);
    INFO(c.args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK_FALSE(fs::exists(out));
  }
  // The first pair alone is fine.
  const Run r = preview(own + " --count 1" + o, dir.root);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(cv::imread(out.string()).size() == preview_layout(1, 1, 192).grid());
}
