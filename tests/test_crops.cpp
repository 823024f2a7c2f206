// data.crop: crops of the model's input from images held at their own size
// (times a scale): where CropSampler puts them, the mirrored padding of small
// images, CropSampler::take against the held images, native loading, and training
// through the binary: the same crops whatever the tower count and across a
// resume, validation on whole images in tiles.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <cmath>
#include <set>
#include <sstream>

#include "data/crops.h"
#include "data/dataset.h"
#include "config/config.h"
#include "io/checkpoint.h"
#include "train/resume_check.h"
#include "process_testing.h"

namespace fs = std::filesystem;
using namespace trainer;
using namespace trainer::testing;

namespace {

/// A 0/1 mask of h x w with one foreground square of side 4 at (x, y).
cv::Mat square_mask(int h, int w, int x, int y) {
  cv::Mat m = cv::Mat::zeros(h, w, CV_8UC1);
  m(cv::Rect(x, y, 4, 4)).setTo(1);
  return m;
}

/// A dataset of one image held at its size: a gray image of mask's size, and mask.
Dataset one_image(const cv::Mat& mask) {
  Dataset d;
  d.names = {"a.png"};
  d.native_images = {cv::Mat(mask.size(), CV_8UC3, cv::Scalar(7, 8, 9))};
  d.native_masks = {mask};
  return d;
}

/// The data.crop config of the process tests' two-level U-Net on data/sample, trained `epochs` into out.
std::string crop_config(const fs::path& out, int epochs) {
  std::string yaml = sample_unet_config(out, "  epochs: " + std::to_string(epochs) + "\n  batch_size: 4\n");
  const std::string split = "  validation_split: 0.2\n";
  REQUIRE(yaml.find(split) != std::string::npos);
  yaml.replace(yaml.find(split), split.size(), split + "  crop: {foreground: 0.5, per_image: 2, tile_overlap: 0.25}\n");
  return yaml;
}

}  // namespace

TEST_CASE("CropSampler::corner draws windows inside the image, the same for the same (seed, pass, crop)", "[crops]") {
  const cv::Mat mask = square_mask(50, 70, 60, 5);
  const Dataset image = one_image(mask);
  CropSampling s{cv::Size(16, 12), 0.0, 200, 9};  // 200 draws of the one image
  const CropSampler uniform(image, s);
  std::set<std::pair<int, int>> seen;
  for (int c = 0; c < 200; ++c) {
    const cv::Point p = uniform.corner(3, c);
    CHECK(p == uniform.corner(3, c));
    CHECK(p.x >= 0);
    CHECK(p.y >= 0);
    CHECK(p.x + 16 <= 70);
    CHECK(p.y + 12 <= 50);
    seen.insert({p.x, p.y});
  }
  CHECK(seen.size() > 150);  // spread over the image
  CHECK(uniform.corner(4, 0) != uniform.corner(3, 0));
  s.seed = 10;
  CHECK(CropSampler(image, s).corner(3, 0) != uniform.corner(3, 0));
  CHECK_THROWS_AS(uniform.corner(1, 200), InternalError);

  // All foreground draws: the window holds the square, moved inside the image where it is near an edge.
  s.foreground = 1.0;
  const CropSampler centred(image, s);
  for (int c = 0; c < 50; ++c) {
    const cv::Point p = centred.corner(1, c);
    CHECK(cv::countNonZero(mask(cv::Rect(p, s.size))) > 0);
    // Centred on a pixel of the square (x 60..63, y 5..8): x - 8 and y - 6, kept inside the image (x <= 54, y >= 0).
    CHECK(p.x >= 52);
    CHECK(p.x <= 54);
    CHECK(p.y <= 2);
  }
  // An empty mask draws anywhere instead.
  const Dataset empty = one_image(cv::Mat::zeros(50, 70, CV_8UC1));
  std::set<std::pair<int, int>> anywhere;
  for (int c = 0; c < 50; ++c) {
    const cv::Point p = CropSampler(empty, s).corner(1, c);
    anywhere.insert({p.x, p.y});
  }
  CHECK(anywhere.size() > 40);
  // Ignored pixels (the type's largest) are not foreground, in 8 and 16 bits.
  for (int depth : {CV_8U, CV_16U}) {
    cv::Mat ignored = cv::Mat::zeros(50, 70, CV_MAKETYPE(depth, 1));
    ignored(cv::Rect(0, 0, 4, 4)).setTo(depth == CV_8U ? 255 : 65535);
    if (depth == CV_8U)
      ignored.at<uint8_t>(40, 30) = 2;  // a class index: foreground
    else
      ignored.at<uint16_t>(40, 30) = 300;
    const Dataset image_with_ignored = one_image(ignored);
    const CropSampler sampler(image_with_ignored, s);
    for (int c = 0; c < 20; ++c) CHECK(cv::Rect(sampler.corner(1, c), s.size).contains({30, 40}));
  }
  // Every foreground pixel is drawn: over many draws, the windows' centres cover the whole square.
  std::set<std::pair<int, int>> centres;
  const Dataset square = one_image(square_mask(50, 70, 30, 20));
  const CropSampler middle(square, CropSampling{cv::Size(16, 12), 1.0, 400, 9});
  for (int c = 0; c < 400; ++c) {
    const cv::Point p = middle.corner(1, c);
    centres.insert({p.x + 8, p.y + 6});
  }
  CHECK(centres.size() == 16);
}

TEST_CASE("images smaller than the crop are mirrored out, as much on each side", "[crops]") {
  cv::Mat img(3, 2, CV_8UC1);
  for (int i = 0; i < 6; ++i) img.data[i] = uint8_t(10 * i);  // rows {0, 10}, {20, 30}, {40, 50}
  const CropSampling s{cv::Size(4, 5), 0.0, 1, 1};
  const Dataset small = one_image(cv::Mat::zeros(3, 2, CV_8UC1));
  const cv::Point p = CropSampler(small, s).corner(1, 0);
  CHECK(p == cv::Point(-1, -1));  // 2 columns and 2 rows added: 1 before each
  const cv::Mat w = crop_window(img, p, s.size);
  REQUIRE(w.size() == s.size);
  // BORDER_REFLECT_101: column -1 is column 1, row -1 row 1; column 2 is column 0, row 3 row 1.
  const uint8_t want[5][4] = {{30, 20, 30, 20}, {10, 0, 10, 0}, {30, 20, 30, 20}, {50, 40, 50, 40}, {30, 20, 30, 20}};
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 4; ++x) CHECK(int(w.at<uint8_t>(y, x)) == int(want[y][x]));
  // Inside the image: a view of it.
  cv::Mat big(10, 10, CV_16UC3, cv::Scalar(1, 2, 3));
  const cv::Mat v = crop_window(big, {2, 3}, {4, 4});
  CHECK(v.data == big.ptr(3, 2));
  // A one-pixel image fills the window with its value.
  const cv::Mat dot(1, 1, CV_8UC1, cv::Scalar(9));
  const Dataset one_pixel = one_image(cv::Mat::zeros(1, 1, CV_8UC1));
  const cv::Point q = CropSampler(one_pixel, s).corner(1, 0);
  CHECK(q == cv::Point(-1, -2));
  CHECK(cv::countNonZero(crop_window(dot, q, s.size) != 9) == 0);
}

TEST_CASE("CropSampler::take copies each crop of the held images and masks in their types", "[crops]") {
  Dataset native;
  for (int i = 0; i < 3; ++i) {
    cv::Mat img(30 + 10 * i, 40, CV_8UC3);
    cv::randu(img, 0, 256);
    native.native_images.push_back(img);
    native.native_masks.push_back(square_mask(30 + 10 * i, 40, 5 * i, 7));
    native.names.push_back("im" + std::to_string(i) + ".png");
  }
  const CropSampling s{cv::Size(16, 16), 0.5, 2, 4};
  const CropSampler sampler(native, s);
  const std::vector<int> ids = {5, 0, 3};  // image 2 draw 1, image 0 draw 0, image 1 draw 1
  Dataset out;
  sampler.take(7, ids, out);
  REQUIRE(out.images.shape().nhwc() == Shape{3, 16, 16, 3}.nhwc());
  CHECK(out.images.dtype() == DType::U8);
  CHECK(out.masks.dtype() == DType::U8);
  CHECK(out.names == std::vector<std::string>{"im2.png", "im0.png", "im1.png"});
  for (int k = 0; k < 3; ++k) {
    const int i = ids[size_t(k)] / 2;
    const cv::Point p = sampler.corner(7, ids[size_t(k)]);
    const cv::Mat img(16, 16, CV_8UC3, out.images.raw_sample(k)), mask(16, 16, CV_8UC1, out.masks.raw_sample(k));
    CHECK(cv::norm(img, native.native_images[size_t(i)](cv::Rect(p, s.size)), cv::NORM_INF) == 0);
    CHECK(cv::norm(mask, native.native_masks[size_t(i)](cv::Rect(p, s.size)), cv::NORM_INF) == 0);
  }
  CHECK_THROWS_AS(sampler.take(1, {6}, out), InternalError);
  const Dataset resized;  // held as tensors (empty here), not at its own sizes
  CHECK_THROWS_AS(CropSampler(resized, s), InternalError);
}

TEST_CASE("load_dataset with native_scale holds each pair at its own size times the scale", "[crops][data]") {
  DataOptions o;
  o.images_dir = std::string(TRAINER_SOURCE_DIR) + "/data/sample/images";
  o.masks_dir = std::string(TRAINER_SOURCE_DIR) + "/data/sample/masks";
  o.height = o.width = 64;
  o.threads = 2;
  const Dataset resized = load_dataset(o);
  o.native_scale = 0.5;
  const Dataset native = load_dataset(o);
  REQUIRE(native.native());
  REQUIRE(native.size() == resized.size());
  CHECK(native.images.numel() == 0);
  for (int i = 0; i < native.size(); ++i) {
    INFO(native.names[size_t(i)]);
    const cv::Mat file = cv::imread(o.images_dir + "/" + native.names[size_t(i)], cv::IMREAD_UNCHANGED);
    const cv::Size want((file.cols + 1) / 2, (file.rows + 1) / 2);
    CHECK(native.native_images[size_t(i)].size() == want);
    CHECK(native.native_images[size_t(i)].type() == CV_8UC3);
    CHECK(native.native_masks[size_t(i)].size() == want);
    CHECK(native.native_masks[size_t(i)].type() == CV_8UC1);
  }
  // The masks hold the classes the resized ones hold (0/1), with foreground.
  CHECK(class_pixel_counts(native, 2)[1] > 0);
  double hi = 0;
  cv::minMaxLoc(native.native_masks[0], nullptr, &hi);
  CHECK(hi == 1);
}

TEST_CASE("data.crop trains the same crops on 1 and 2 towers and across a resume, validating in tiles",
          "[crops][e2e][resume][multitower]") {
  const TempDir d("crop_runs");
  const fs::path& dir = d.root;
  std::ofstream(dir / "full.yaml") << crop_config(dir / "full", 2);
  std::ofstream(dir / "part.yaml") << crop_config(dir / "part", 2);
  std::ofstream(dir / "two.yaml") << crop_config(dir / "two", 2);
  const Run full = run_trainer("--config " + (dir / "full.yaml").string() + " --gpus cpu --threads 2", dir);
  INFO(full.out << full.err);
  REQUIRE(full.code == 0);
  CHECK_THAT(full.err, Catch::Contains("training on crops of 64x64 (the model's input) from the images at their own "
                                       "size, 2 per image per epoch (64 a pass), 50% of them centred on a foreground "
                                       "pixel; validating on whole images in tiles (overlap 0.25, gaussian blend)"));
  CHECK_THAT(full.out, Catch::Contains("Epoch 1/2 - 16 steps"));  // 32 training images, 2 crops each, batch 4
  REQUIRE(run_trainer("--config " + (dir / "part.yaml").string() + " --gpus cpu --threads 2 --epochs 1", dir).code == 0);
  const Run resumed = run_trainer("--config " + (dir / "part.yaml").string() + " --gpus cpu --threads 2 --resume " +
                                      (dir / "part" / "last.h5").string(), dir);
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.code == 0);
  const Checkpoint a = load_checkpoint((dir / "full" / "last.h5").string()),
                   b = load_checkpoint((dir / "part" / "last.h5").string());
  REQUIRE(a.weights.size() == b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) CHECK(a.weights[i].values == b.weights[i].values);  // bit for bit
  CHECK(slurp(dir / "full" / "log.csv") == slurp(dir / "part" / "log.csv"));

  // predict takes a crop-trained checkpoint's tiles without being told.
  const std::string sample = std::string(TRAINER_SOURCE_DIR) + "/data/sample/images";
  const Run p = run_trainer("predict --checkpoint " + (dir / "full" / "final.h5").string() + " -i " + sample +
                                " -o " + (dir / "masks").string() + " --gpus cpu", dir);
  INFO(p.out << p.err);
  REQUIRE(p.code == 0);
  CHECK_THAT(p.err, Catch::Contains("predicting each image at its own size in tiles of 64x64 (the model's input), "
                                    "overlap 0.25, gaussian blend"));
  const Run p2 = run_trainer("predict --checkpoint " + (dir / "full" / "final.h5").string() + " -i " + sample +
                                 " -o " + (dir / "masks2").string() + " --gpus cpu --tile-overlap 0.5", dir);
  CHECK_THAT(p2.err, Catch::Contains("overlap 0.5, gaussian blend"));
  for (const auto& e : fs::directory_iterator(sample)) {
    const cv::Mat image = cv::imread(e.path().string(), cv::IMREAD_UNCHANGED);
    const cv::Mat mask = cv::imread((dir / "masks" / (e.path().stem().string() + "_mask.png")).string(),
                                    cv::IMREAD_UNCHANGED);
    CHECK(mask.size() == image.size());
  }

  const Run two = run_trainer("--config " + (dir / "two.yaml").string() + " --gpus cpu:2 --threads 2", dir);
  INFO(two.out << two.err);
  REQUIRE(two.code == 0);
  const Checkpoint c = load_checkpoint((dir / "two" / "last.h5").string());
  double worst = 0;
  for (size_t i = 0; i < a.weights.size(); ++i)
    for (size_t j = 0; j < a.weights[i].values.size(); ++j) {
      const double x = a.weights[i].values[j], y = c.weights[i].values[j];
      worst = std::max(worst, std::abs(x - y) / std::max(1.0, std::abs(x)));
    }
  INFO("2 towers against 1: largest relative weight difference " << worst);
  CHECK(worst < 1e-4);  // the same crops in the same order: only the towers' summation order differs
  // The validation of whole images in tiles is logged and moves with training.
  REQUIRE(a.logs.count("val_loss"));
  CHECK(std::isfinite(a.logs.at("val_loss")));
  std::istringstream csv(slurp(dir / "full" / "log.csv"));
  std::string header, first, second;
  std::getline(csv, header);
  std::getline(csv, first);
  std::getline(csv, second);
  CHECK_THAT(header, Catch::EndsWith("val_loss"));
  CHECK(first.substr(first.rfind(',')) != second.substr(second.rfind(',')));
}

TEST_CASE("resuming with other data.crop settings is said", "[crops][resume]") {
  std::string yaml = crop_config("out", 2), plain = yaml;
  plain.erase(plain.find("  crop: "), plain.find('\n', plain.find("  crop: ")) + 1 - plain.find("  crop: "));
  const Config with = parse_config(yaml, "a.yaml"), without = parse_config(plain, "b.yaml");
  yaml.replace(yaml.find("per_image: 2"), 12, "per_image: 3");
  const Config more = parse_config(yaml, "c.yaml");
  CHECK(resume_differences(with, with, "x.h5").empty());
  const auto mode = resume_differences(without, with, "x.h5");
  REQUIRE(mode.size() == 1);
  CHECK(mode[0] == "data.crop is none (images resized to the Input) (the checkpoint's run used crops at native "
                   "resolution)");
  const auto draws = resume_differences(more, with, "x.h5");
  REQUIRE(draws.size() == 1);
  CHECK(draws[0] == "data.crop.per_image is 3 (the checkpoint's run used 2)");
}
