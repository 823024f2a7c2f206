// trainer predict --tiles through the binary: masks at each image's own size,
// a large image (made here) predicted in memory bounded by its pixels, not by
// a float map of them, and the flags' errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "process_testing.h"

namespace fs = std::filesystem;
using namespace trainer::testing;

namespace {

/// A gray network of 1x1 convolutions at 128x128 trained one epoch on data/sample; returns final.h5's path.
fs::path train_pointwise(const fs::path& dir) {
  const std::string sample = std::string(TRAINER_SOURCE_DIR) + "/data/sample";
  std::ofstream(dir / "pointwise.yaml") << R"(model:
  name: pointwise
  layers:
    - {name: in, type: Input, shape: [128, 128, 1]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 4, kernel_size: 1, activation: relu}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data:
  images: )" + sample + R"(/images
  masks: )" + sample + R"(/masks
training:
  epochs: 1
  batch_size: 8
  seed: 1
  optimizer: {type: Adam, learning_rate: 0.05}
  output_dir: )" + (dir / "run").string() + "\n";
  const Run r = run_trainer("--config " + (dir / "pointwise.yaml").string() + " --gpus cpu", dir);
  if (r.code != 0) throw std::runtime_error("training the test model failed: " + r.out + r.err);
  return dir / "run" / "final.h5";
}

/// A gray image of discs on a gradient, h x w, written to path.
void write_discs(const fs::path& path, int h, int w) {
  cv::Mat m(h, w, CV_8UC1);
  for (int y = 0; y < h; ++y) m.row(y).setTo(y * 60 / h);
  for (int y = 40; y + 40 < h; y += 97)
    for (int x = 40; x + 40 < w; x += 89) cv::circle(m, {x, y}, 25, cv::Scalar(230), cv::FILLED);
  REQUIRE(cv::imwrite(path.string(), m));
}

}  // namespace

TEST_CASE("predict --tiles writes each image's mask at its size and needs no float map of a large image",
          "[tiling][e2e]") {
  const TempDir d("tiles_cli");
  const fs::path ckpt = train_pointwise(d.root);
  fs::create_directories(d.root / "small");
  fs::create_directories(d.root / "large");
  write_discs(d.root / "small" / "s.png", 300, 200);
  const int h = 4000, w = 3000;
  write_discs(d.root / "large" / "l.png", h, w);
  const std::string common = " --checkpoint " + ckpt.string() + " --gpus cpu --tiles --tile-overlap 0.25 --batch-size 8";
  const Run small = run_trainer("predict -i " + (d.root / "small").string() + " -o " + (d.root / "out_s").string() +
                                    common + " --instances", d.root);
  REQUIRE(small.code == 0);
  const cv::Mat instances = cv::imread((d.root / "out_s" / "s_instances.png").string(), cv::IMREAD_UNCHANGED);
  const cv::Mat small_mask = cv::imread((d.root / "out_s" / "s_mask.png").string(), cv::IMREAD_UNCHANGED);
  REQUIRE(instances.type() == CV_16UC1);
  CHECK(cv::countNonZero((instances != 0) != (small_mask != 0)) == 0);  // the mask's foreground, labelled
  const Run large = run_trainer("predict -i " + (d.root / "large").string() + " -o " + (d.root / "out_l").string() +
                                    common + " --probabilities", d.root);
  INFO(large.out << large.err);
  REQUIRE(large.code == 0);
  CHECK(large.err.find("in tiles of 128x128") != std::string::npos);
  const cv::Mat mask = cv::imread((d.root / "out_l" / "l_mask.png").string(), cv::IMREAD_UNCHANGED);
  REQUIRE(mask.size() == cv::Size(w, h));
  const cv::Mat prob = cv::imread((d.root / "out_l" / "l_prob.png").string(), cv::IMREAD_UNCHANGED);
  REQUIRE(prob.size() == cv::Size(w, h));
  CHECK(cv::countNonZero(mask != ((prob > 127) & 255)) < w * h / 1000);  // 8-bit rounding aside
  // The image, its mask and its 8-bit probabilities are a byte per pixel each; one float map of the image
  // (probabilities or blend sums) would be 4 more.
  const double extra_bytes_per_pixel = double(large.max_rss_kb - small.max_rss_kb) * 1024.0 / (double(h) * w);
  INFO("peak memory " << small.max_rss_kb << " KiB (300x200) and " << large.max_rss_kb << " KiB (" << w << "x" << h
                      << "): " << extra_bytes_per_pixel << " bytes per pixel more");
  if (trainer::testing::kPeakMemoryMeasured) CHECK(extra_bytes_per_pixel < 4.5);

  // A model trained on resized images predicts resized unless asked for tiles: a tile setting alone is an error.
  const Run without = run_trainer("predict -i " + (d.root / "small").string() + " -o " + (d.root / "out_w").string() +
                                      " --checkpoint " + ckpt.string() + " --gpus cpu --tile-overlap 0.5", d.root);
  CHECK(without.code == 2);
  CHECK_THAT(without.err, Catch::Contains("add --tiles"));
  CHECK_FALSE(fs::exists(d.root / "out_w"));
  // --split-depth splits --instances' nuclei: alone it is an error.
  const Run depth = run_trainer("predict -i " + (d.root / "small").string() + " -o " + (d.root / "out_d").string() +
                                    " --checkpoint " + ckpt.string() + " --gpus cpu --split-depth 1", d.root);
  CHECK(depth.code == 2);
  CHECK_THAT(depth.err, Catch::Contains("add --instances"));
}

TEST_CASE("predict's tile blend is one of the blends", "[tiling][e2e]") {
  const TempDir d("tiles_flags");
  const std::string args = " --checkpoint nowhere.h5 -i nowhere -o " + (d.root / "out").string();
  const Run blend = run_trainer("predict" + args + " --tiles --tile-blend cosine", d.root);
  CHECK(blend.code == 2);
  CHECK(blend.err.find("cosine") != std::string::npos);
}
