// trainer predict and trainer evaluate through the binary: a tiny model trained
// for a few epochs on the embedded sample predicts real DSB 2018 images of
// several sizes and is evaluated against label images and the competition's
// mask folders; bad inputs exit with 2 and a message naming them.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "dsb_testing.h"
#include "process_testing.h"
#include "train/evaluate.h"

namespace fs = std::filesystem;
using namespace trainer::testing;

namespace {

const std::string kFlat = std::string(TRAINER_SOURCE_DIR) + "/../shared/data/dsb2018/flat";
const std::string kNative = std::string(TRAINER_SOURCE_DIR) + "/../shared/data/dsb2018/native";
// Images of 320x256, 360x360 and 347x260 pixels (the model's input is 64x64).
const std::vector<std::string> kIds = {"0121d6759c5adb290c8e828fc882f37dfaf3663ec885c663859948c154a443ed",
                                       "02903040e19ddf92f452907644ad3822918f54af41dd85e5a3fe3e1b6d6f9339",
                                       "0402a81e75262469925ea893b6706183832e85324f7b1e08e634129f5d522cdd"};
// DSB ids of 256x256 (42 nuclei) and 360x360 (25 nuclei).
const std::vector<std::string> kNativeIds = {"61a15ccbfebb9d2fc54c068472a75d7babfb3f48fea008470e7db807585f9510",
                                             "66236902b874b7e4b3891db63a69f6d56f6edcec6aca7ba3c6871d73e7b4c34f"};

// A folder shared by the cases of this file: a checkpoint trained once for 20 epochs
// (a two-level U-Net of width 8 at 64x64) and a folder of links to the kIds images.
struct Fixture {
  fs::path dir, checkpoint, images;
  Fixture() {
    dir = temp_dir("predeval");
    images = dir / "images";
    fs::create_directories(images);
    for (const auto& id : kIds) fs::create_symlink(kFlat + "/train_im/" + id + ".png", images / (id + ".png"));
    // 40 epochs: a model of this size may still predict only background after 20 (seed 1 did).
    std::ofstream(dir / "unet.yaml") << trainer::testing::sample_unet_config(dir / "run", R"(  epochs: 40
  batch_size: 4
  loss: binary_crossentropy
  metrics: [mean_iou]
)");
    const Run r = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu", dir);
    if (r.code != 0) throw std::runtime_error("training the test model failed: " + r.out + r.err);
    checkpoint = dir / "run" / "final.h5";
  }
  ~Fixture() { fs::remove_all(dir); }
};

const Fixture& fixture() {
  static Fixture f;
  return f;
}

// A folder of its own for one case's outputs, inside the fixture's.
fs::path case_dir(const std::string& name) { return fresh_subdir(fixture().dir, name); }

std::vector<std::vector<std::string>> read_csv(const fs::path& p) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(slurp(p));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::istringstream l(line);
    for (std::string cell; std::getline(l, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

int distinct_labels(const cv::Mat& labels) {
  std::set<int> ids;
  cv::Mat v;
  labels.convertTo(v, CV_32S);
  for (auto it = v.begin<int>(); it != v.end<int>(); ++it)
    if (*it) ids.insert(*it);
  return int(ids.size());
}

double printed(const std::string& out, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(pattern))) return -1;
  return std::stod(m[1]);
}

/// Links the DSB image id and its binary mask into folder (<id>.png, <id>_mask.png), as training's one-folder
/// layout holds them.
void link_image_and_mask(const std::string& id, const fs::path& folder) {
  fs::create_symlink(kFlat + "/train_im/" + id + ".png", folder / (id + ".png"));
  fs::create_symlink(kFlat + "/train_mask/" + id + "_mask.png", folder / (id + "_mask.png"));
}

}  // namespace

TEST_CASE("predict writes masks at each image's own size, and probabilities and overlays on request",
          "[predict]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const fs::path out = case_dir("predict") / "masks";  // created by predict
  const Run r = run_trainer("predict --checkpoint " + f.checkpoint.string() + " --input " + f.images.string() +
                                " --output " + out.string() + " --probabilities --overlay --gpus cpu:2 --batch-size 2",
                            out.parent_path());
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("Predicted 3 image(s): 9 file(s) in " + out.string()));
  long foreground = 0;
  for (const auto& id : kIds) {
    INFO(id);
    const cv::Mat image = cv::imread(kFlat + "/train_im/" + id + ".png", cv::IMREAD_UNCHANGED);
    const cv::Mat mask = cv::imread((out / (id + "_mask.png")).string(), cv::IMREAD_UNCHANGED);
    const cv::Mat prob = cv::imread((out / (id + "_prob.png")).string(), cv::IMREAD_UNCHANGED);
    const cv::Mat overlay = cv::imread((out / (id + "_overlay.png")).string(), cv::IMREAD_UNCHANGED);
    REQUIRE(!mask.empty());
    REQUIRE(!prob.empty());
    REQUIRE(!overlay.empty());
    CHECK(mask.size() == image.size());
    CHECK(mask.type() == CV_8UC1);
    CHECK(cv::countNonZero(mask != 0 & mask != 255) == 0);
    foreground += cv::countNonZero(mask);
    CHECK(prob.size() == image.size());
    CHECK(prob.type() == CV_8UC1);
    // mask = p > 0.5 and prob = round(255 p) agree away from the rounding boundary.
    const cv::Mat decided = (prob < 127) | (prob > 128);
    CHECK(cv::countNonZero(((mask != 0) != (prob > 128)) & decided) == 0);
    CHECK(overlay.size() == image.size());
    CHECK(overlay.type() == CV_8UC3);
  }
  CHECK(foreground > 0);  // the trained model finds nuclei
  for (const auto& e : fs::directory_iterator(out))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);

  // Float probabilities (TIFF): the same map before its 8-bit rounding.
  const fs::path tiff = out.parent_path() / "tiff";
  const Run t = run_trainer("predict --checkpoint " + f.checkpoint.string() + " --input " + f.images.string() +
                                " --output " + tiff.string() + " --probabilities --probability-format tiff --gpus cpu",
                            out.parent_path());
  INFO(t.out << t.err);
  REQUIRE(t.code == 0);
  for (const auto& id : kIds) {
    const cv::Mat p32 = cv::imread((tiff / (id + "_prob.tif")).string(), cv::IMREAD_UNCHANGED);
    const cv::Mat p8 = cv::imread((out / (id + "_prob.png")).string(), cv::IMREAD_UNCHANGED);
    REQUIRE(p32.type() == CV_32FC1);
    REQUIRE(p32.size() == p8.size());
    double lo = 0, hi = 0, off = 0;
    cv::minMaxLoc(p32, &lo, &hi);
    CHECK(lo >= 0.0);
    CHECK(hi <= 1.0);
    cv::Mat p8f;
    p8.convertTo(p8f, CV_32F);
    cv::minMaxLoc(cv::abs(p32 * 255.0 - p8f), nullptr, &off);
    CHECK(off <= 0.5 + 1e-3);  // round(255 p), from 1 tower here and 2 there
    CHECK(hi - lo > 0.1);      // a map, not a constant
  }
  // Test-time augmentation: the same files, from the mean over the 8 symmetries.
  const fs::path tta = out.parent_path() / "tta";
  const Run a = run_trainer("predict --checkpoint " + f.checkpoint.string() + " --input " + f.images.string() +
                                " --output " + tta.string() + " --probabilities --probability-format tiff --tta --gpus cpu",
                            out.parent_path());
  INFO(a.out << a.err);
  REQUIRE(a.code == 0);
  CHECK_THAT(a.err, Catch::Contains("test-time augmentation: each prediction is the mean over the 8 flips and "
                                    "quarter turns"));
  double moved = 0;
  for (const auto& id : kIds) {
    const cv::Mat p = cv::imread((tiff / (id + "_prob.tif")).string(), cv::IMREAD_UNCHANGED);
    const cv::Mat q = cv::imread((tta / (id + "_prob.tif")).string(), cv::IMREAD_UNCHANGED);
    REQUIRE(q.size() == p.size());
    double m = 0;
    cv::minMaxLoc(cv::abs(p - q), nullptr, &m);
    moved = std::max(moved, m);
  }
  CHECK(moved > 1e-4);  // averaging changed the maps
  CHECK(moved < 0.9);   // but they are still maps of the same image
  const Run needs = run_trainer("predict --checkpoint " + f.checkpoint.string() + " --input " + f.images.string() +
                                    " --output " + (out.parent_path() / "no").string() + " --probability-format tiff",
                                out.parent_path());
  CHECK(needs.code == 2);
  CHECK_THAT(needs.err, Catch::Contains("--probabilities"));
  CHECK_FALSE(fs::exists(out.parent_path() / "no"));

  // One file, one tower, a higher threshold: a subset of the mask at 0.5, and only the mask.
  const fs::path single = out.parent_path() / "single";
  const Run s = run_trainer("predict --checkpoint " + f.checkpoint.string() + " --input " +
                                (f.images / (kIds[1] + ".png")).string() + " --output " + single.string() +
                                " --threshold 0.7 --gpus cpu",
                            out.parent_path());
  REQUIRE(s.code == 0);
  CHECK(std::distance(fs::directory_iterator(single), fs::directory_iterator()) == 1);
  const cv::Mat high = cv::imread((single / (kIds[1] + "_mask.png")).string(), cv::IMREAD_UNCHANGED);
  const cv::Mat low = cv::imread((out / (kIds[1] + "_mask.png")).string(), cv::IMREAD_UNCHANGED);
  REQUIRE(high.size() == low.size());
  CHECK(cv::countNonZero(high & ~low) == 0);
  CHECK(cv::countNonZero(high) < cv::countNonZero(low));

  // A folder predicted into itself twice: the second run leaves out the
  // first's outputs (it read them as images and wrote <stem>_mask_mask.png).
  const fs::path same = out.parent_path() / "same";
  fs::create_directories(same);
  for (const auto& id : kIds) fs::copy_file(f.images / (id + ".png"), same / (id + ".png"));
  const std::string again = "predict --checkpoint " + f.checkpoint.string() + " --input " + same.string() +
                            " --output " + (same / ".").string() + " --probabilities --gpus cpu";
  for (int run = 0; run < 2; ++run) {
    if (run == 1) {
      // Existing outputs are replaced only with --overwrite (from fuzzing: predicting into a
      // training mask folder replaced its <stem>_mask.png masks); nothing is written before.
      const std::string before = slurp(same / (kIds[0] + "_mask.png"));
      const Run refused = run_trainer(again, out.parent_path());
      CHECK(refused.code == 2);
      CHECK_THAT(refused.err, Catch::Contains("_mask.png' and 5 more output file(s) exist; predict replaces no file "
                                              "without --overwrite"));
      CHECK(slurp(same / (kIds[0] + "_mask.png")) == before);
    }
    const Run p = run_trainer(again + (run == 1 ? " --overwrite" : ""), out.parent_path());
    INFO(p.out << p.err);
    REQUIRE(p.code == 0);
    CHECK_THAT(p.out, Catch::Contains("Predicted 3 image(s): 6 file(s)"));
    if (run == 1) CHECK_THAT(p.err, Catch::Contains("leaving out 6 file(s) that this prediction writes itself"));
  }
  CHECK(std::distance(fs::directory_iterator(same), fs::directory_iterator()) == 9);
}

TEST_CASE("evaluate against label images prints pixel metrics and the instance score and writes a CSV",
          "[evaluate]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const fs::path dir = case_dir("evaluate");
  const fs::path csv = dir / "scores.csv";
  const std::string base = "evaluate --checkpoint " + f.checkpoint.string() + " --images " + f.images.string();
  const Run r = run_trainer(base + " --labels " + kFlat + "/labels --csv " + csv.string() + " --gpus cpu:2", dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const double iou = printed(r.out, R"(mean_iou: ([0-9.]+))");
  CHECK(iou > 0);
  CHECK(iou <= 1);
  CHECK(printed(r.out, R"(loss: ([0-9.]+))") > 0);
  CHECK(printed(r.out, R"(dice: ([0-9.]+))") > 0);
  CHECK(printed(r.out, R"(accuracy: ([0-9.]+))") > 0.5);
  // dice is the harmonic mean of precision and recall (all at 0.5, over the same pixels)
  const double precision = printed(r.out, R"(- precision: ([0-9.]+))"), recall = printed(r.out, R"(recall: ([0-9.]+))");
  CHECK(precision > 0);
  CHECK(recall > 0);
  CHECK(printed(r.out, R"(dice: ([0-9.]+))") == Approx(2 * precision * recall / (precision + recall)).margin(2e-4));
  const double score = printed(r.out, R"(instance score .*: ([0-9.]+))");
  REQUIRE(score >= 0);
  // --tta: the same report from the averaged predictions (different numbers, same ranges).
  const Run t = run_trainer(base + " --labels " + kFlat + "/labels --tta --gpus cpu", dir);
  INFO(t.out << t.err);
  REQUIRE(t.code == 0);
  CHECK_THAT(t.err, Catch::Contains("test-time augmentation"));
  const double tta_iou = printed(t.out, R"(mean_iou: ([0-9.]+))");
  CHECK(tta_iou > 0);
  CHECK(tta_iou <= 1);
  auto metrics_line = [](const std::string& out) { return out.substr(out.find("pixel metrics")).substr(0, 160); };
  CHECK(metrics_line(t.out) != metrics_line(r.out));  // other predictions, other figures

  const auto rows = read_csv(csv);
  REQUIRE(rows.size() == kIds.size() + 1);
  CHECK(rows[0] == std::vector<std::string>{"image", "n_true", "n_pred", "score", "precision_50", "precision_75"});
  double mean = 0;
  // The fixture's small model finds some nuclei, though not necessarily in each image (the dim first one).
  int predicted = 0;
  for (size_t i = 0; i < kIds.size(); ++i) {
    REQUIRE(rows[i + 1].size() == 6);
    CHECK(rows[i + 1][0] == kIds[i] + ".png");
    const cv::Mat labels = cv::imread(kFlat + "/labels/" + kIds[i] + "_labels.png", cv::IMREAD_UNCHANGED);
    CHECK(std::stoi(rows[i + 1][1]) == distinct_labels(labels));
    predicted += std::stoi(rows[i + 1][2]);
    const double s = std::stod(rows[i + 1][3]), p50 = std::stod(rows[i + 1][4]), p75 = std::stod(rows[i + 1][5]);
    CHECK(s >= 0);
    CHECK(p50 <= 1);
    CHECK(p75 <= p50);  // precision falls as the IoU threshold rises
    mean += s / double(kIds.size());
  }
  CHECK(predicted > 0);
  CHECK(score == Approx(mean).margin(1e-4));

  // Binary masks: the same foreground, so the same pixel metrics.
  const Run m = run_trainer(base + " --masks " + kFlat + "/train_mask --gpus cpu", dir);
  INFO(m.out << m.err);
  REQUIRE(m.code == 0);
  CHECK(printed(m.out, R"(mean_iou: ([0-9.]+))") == Approx(iou).margin(2e-4));
  CHECK_THAT(m.err, !Catch::Contains("label images"));
  // Images and masks in one folder, as training takes them: the masks are not images.
  fs::create_directories(dir / "together");
  for (const auto& id : kIds) link_image_and_mask(id, dir / "together");
  const std::string together = " --images " + (dir / "together").string();
  const Run one = run_trainer(base.substr(0, base.find(" --images ")) + together + " --masks " +
                                  (dir / "together").string() + " --gpus cpu",
                              dir);
  INFO(one.out << one.err);
  REQUIRE(one.code == 0);
  CHECK(printed(one.out, R"(mean_iou: ([0-9.]+))") == Approx(iou).margin(2e-4));
  // A checkpoint of masks named as their images (data.mask_suffix ''): each image would be its own truth.
  trainer::EvalOptions own{trainer::TruthKind::kMasks, (dir / "together").string(), (dir / "together").string(), "", "--masks"};
  CHECK_THROWS_WITH(trainer::find_eval_samples(own), Catch::Contains("is the images' folder and --mask-suffix is empty"));
  // Label images passed as masks: the same foreground, but touching nuclei merge; warned.
  const Run as_masks = run_trainer(base + " --masks " + kFlat + "/labels --mask-suffix _labels --gpus cpu", dir);
  INFO(as_masks.out << as_masks.err);
  REQUIRE(as_masks.code == 0);
  CHECK_THAT(as_masks.err, Catch::Contains(std::to_string(kIds.size()) + " of " + std::to_string(kIds.size()) +
                                           " mask(s) hold the values 1..N of label images") &&
                               Catch::Contains("pass label images with --labels instead of --masks"));

  // The same binary masks passed as labels: warned, as their nuclei would all be one object.
  CHECK_THAT(r.err, !Catch::Contains("binary masks?"));
  const Run wrong = run_trainer(base + " --labels " + kFlat + "/train_mask --labels-suffix _mask --gpus cpu", dir);
  INFO(wrong.out << wrong.err);
  REQUIRE(wrong.code == 0);
  CHECK_THAT(wrong.err, Catch::Contains(std::to_string(kIds.size()) + " of " + std::to_string(kIds.size()) +
                                        " label image(s) hold only 0 and one of 255 or 65535") &&
                            Catch::Contains("pass binary masks with --masks"));
}

TEST_CASE("evaluate against the competition's per-nucleus mask folders", "[evaluate]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const fs::path dir = case_dir("native");
  fs::create_directories(dir / "dsb");
  for (const auto& id : kNativeIds) fs::create_directory_symlink(kNative + "/" + id, dir / "dsb" / id);
  const fs::path csv = dir / "native.csv";
  const Run r = run_trainer("evaluate --checkpoint " + f.checkpoint.string() + " --native " + (dir / "dsb").string() +
                                " --csv " + csv.string() + " --gpus cpu:2",
                            dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("Evaluated 2 image(s)") && Catch::Contains("mean_iou:"));
  CHECK(printed(r.out, R"(instance score .*: ([0-9.]+))") >= 0);
  const auto rows = read_csv(csv);
  REQUIRE(rows.size() == 3);
  for (size_t i = 0; i < kNativeIds.size(); ++i) {
    CHECK(rows[i + 1][0] == kNativeIds[i]);
    const auto masks = std::distance(fs::directory_iterator(kNative + "/" + kNativeIds[i] + "/masks"),
                                     fs::directory_iterator());
    CHECK(std::stoi(rows[i + 1][1]) == masks);  // one nucleus per mask file
  }
  // An earlier --csv is replaced; any other file is not (--csv naming the checkpoint replaced it).
  const std::string again = "evaluate --checkpoint " + f.checkpoint.string() + " --native " + (dir / "dsb").string() +
                            " --gpus cpu --csv ";
  const Run twice = run_trainer(again + csv.string(), dir);
  INFO(twice.out << twice.err);
  CHECK(twice.code == 0);
  CHECK(read_csv(csv) == rows);
  const std::string checkpoint_bytes = slurp(f.checkpoint);
  const Run onto_checkpoint = run_trainer(again + f.checkpoint.string(), dir);
  CHECK(onto_checkpoint.code == 2);
  CHECK_THAT(onto_checkpoint.err, Catch::Contains("is an HDF5 file (a checkpoint?) that would be replaced; --csv "
                                                  "writes the per-image scores as CSV"));
  CHECK(slurp(f.checkpoint) == checkpoint_bytes);
  std::ofstream(dir / "unet.yaml") << "model: {}\n";
  const Run onto_config = run_trainer(again + (dir / "unet.yaml").string(), dir);
  CHECK(onto_config.code == 2);
  CHECK_THAT(onto_config.err, Catch::Contains("--csv '" + (dir / "unet.yaml").string() + "' exists and is not an "
                                              "earlier evaluate --csv"));
  CHECK(slurp(dir / "unet.yaml") == "model: {}\n");
}

TEST_CASE("bad predict and evaluate inputs exit with 2 and a message naming them", "[predict][evaluate]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const fs::path dir = case_dir("errors");
  std::ofstream(dir / "notes.h5") << "not a checkpoint\n";
  fs::create_directories(dir / "empty");
  fs::create_directories(dir / "broken");
  std::ofstream(dir / "broken" / "cells.png") << "not a png";
  // Truth files named for the first image, one colour and one damaged: --labels and --masks name them.
  const fs::path first_image = *fs::directory_iterator(f.images);
  const std::string stem = first_image.stem().string();
  for (const char* folder : {"colour", "damaged"}) fs::create_directories(dir / folder);
  cv::imwrite((dir / "colour" / (stem + "_labels.png")).string(), cv::Mat(8, 8, CV_8UC3, cv::Scalar(0, 1, 2)));
  std::ofstream(dir / "damaged" / (stem + "_mask.png")) << "\x89PNG cut short";
  const std::string first_only = " --images " + (dir / "first").string();
  fs::create_directories(dir / "first");
  fs::copy_file(first_image, dir / "first" / first_image.filename());
  const std::string ckpt = " --checkpoint " + f.checkpoint.string();
  const std::string in = " --input " + f.images.string() + " --output " + (dir / "out").string();
  const std::string images = " --images " + f.images.string();
  const std::string to_x = " --output " + (dir / "x").string();
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"predict --checkpoint " + (dir / "missing.h5").string() + in, "missing.h5"},
      {"predict --checkpoint " + (dir / "notes.h5").string() + in, "notes.h5' is not an HDF5 file"},
      {"predict" + ckpt + " --input " + (dir / "nowhere").string() + to_x, "nowhere' does not exist"},
      {"predict" + ckpt + " --input " + (dir / "empty").string() + to_x, "empty' holds no images"},
      {"predict" + ckpt + " --input " + (dir / "broken").string() + to_x, "cells.png"},
      {"predict" + ckpt + in + " --threshold 1.5", "--threshold 1.5 is outside (0, 1)"},
      {"predict" + ckpt + in + " --threshold 0", "--threshold 0 is outside (0, 1)"},
      {"evaluate --checkpoint " + (dir / "notes.h5").string() + images + " --labels " + kFlat + "/labels",
       "notes.h5"},
      {"evaluate" + ckpt + images, "needs the ground truth"},
      {"evaluate" + ckpt + " --labels " + kFlat + "/labels", "needs --images"},
      {"evaluate" + ckpt + images + " --labels " + (dir / "empty").string(), "empty' holds no images"},
      {"evaluate" + ckpt + images + " --labels " + kFlat + "/train_mask",
       "_mask.png': binary masks? pass them with --masks instead of --labels)"},
      {"evaluate" + ckpt + images + " --labels " + kFlat + "/labels --threshold 2", "--threshold 2 is outside"},
      {"evaluate" + ckpt + " --native " + (dir / "empty").string(), "holds no id folders"},
      {"evaluate" + ckpt + images + " --native " + (dir / "empty").string(), "--images excludes --native"},
      {"evaluate" + ckpt + first_only + " --labels " + (dir / "colour").string(), "_labels.png' has 3 channels"},
      {"evaluate" + ckpt + first_only + " --labels " + kFlat + "/labels --csv " + (dir / "empty").string(),
       "--csv: '" + (dir / "empty").string() + "' is a folder; name the file to write, e.g. " +
           (dir / "empty" / "scores.csv").string()},
      {"evaluate" + ckpt + first_only + " --masks " + (dir / "damaged").string() + " --mask-suffix _mask",
       "_mask.png' (corrupt, truncated or not an image)"},
  };
  for (const auto& c : cases) {
    const Run r = run_trainer(c.args + " --gpus cpu", dir);
    INFO(c.args << "\n" << r.out << r.err);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.message));
  }
  CHECK_FALSE(fs::exists(dir / "out"));
  CHECK_FALSE(fs::exists(dir / "x"));  // not even created empty for an image that does not decode

  // An image that does not decode after others were written: what is written is said, and how to go on.
  fs::create_directories(dir / "mixed");
  const fs::path first = *fs::directory_iterator(f.images);
  fs::copy_file(first, dir / "mixed" / first.filename());
  std::ofstream(dir / "mixed" / "zzz.png") << "not a png";
  const Run mixed = run_trainer("predict" + ckpt + " --input " + (dir / "mixed").string() + " --output " +
                                    (dir / "mixed_out").string() + " --batch-size 1 --gpus cpu", dir);
  INFO(mixed.out << mixed.err);
  CHECK(mixed.code == 2);
  CHECK_THAT(mixed.err, Catch::Contains("zzz.png") &&
                            Catch::Contains("; 1 output file(s) were written into '" +
                                            (dir / "mixed_out").string() + "' before this error: once it is dealt "
                                            "with, predict again with --overwrite (or into another --output)"));
  CHECK(fs::exists(dir / "mixed_out" / (first.stem().string() + "_mask.png")));
}

TEST_CASE("evaluate's CSV quotes image names holding commas, quotes or line breaks (RFC 4180)", "[evaluate]") {
  // "well A1, field 2.png" made a row of 7 fields under a header of 6.
  trainer::EvalResult r;
  for (const char* name : {"plain.png", "well A1, field 2.png", "q\"uote.png"}) {
    r.samples.push_back({name, name, name});
    r.scores.push_back({3, 2, {}, 0.5});
  }
  const fs::path path = case_dir("csv_quoting") / "scores.csv";
  trainer::write_scores_csv(r, path.string());
  std::istringstream in(slurp(path));
  std::string header, line;
  std::getline(in, header);
  std::vector<std::string> rows;
  while (std::getline(in, line)) rows.push_back(line);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0] == "plain.png,3,2,0.5,0,0");
  CHECK(rows[1] == "\"well A1, field 2.png\",3,2,0.5,0,0");
  CHECK(rows[2] == "\"q\"\"uote.png\",3,2,0.5,0,0");
}

TEST_CASE("predict on a folder of images and their masks predicts the images alone", "[predict]") {
  TRAINER_REQUIRE_DSB();
  // In the layout training takes (a.png beside a_mask.png) the masks were predicted too, as
  // <stem>_mask_mask.png.
  const Fixture& f = fixture();
  const fs::path dir = case_dir("predict_together");
  fs::create_directories(dir / "in");
  const std::string id = kIds[0];
  link_image_and_mask(id, dir / "in");
  const Run r = run_trainer("predict --checkpoint " + f.checkpoint.string() + " --input " + (dir / "in").string() +
                                " --output " + (dir / "out").string() + " --gpus cpu",
                            dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("left out the 1 mask(s) beside their images"));
  CHECK(fs::exists(dir / "out" / (id + "_mask.png")));
  CHECK_FALSE(fs::exists(dir / "out" / (id + "_mask_mask.png")));
  // A checkpoint trained with masks in their own folder (mask_suffix '') says nothing of this folder's: the flag.
  fs::rename(dir / "in" / (id + "_mask.png"), dir / "in" / (id + "-gt.png"));
  const Run named = run_trainer("predict --checkpoint " + f.checkpoint.string() + " --input " + (dir / "in").string() +
                                    " --output " + (dir / "out2").string() + " --gpus cpu --mask-suffix -gt",
                                dir);
  INFO(named.out << named.err);
  REQUIRE(named.code == 0);
  CHECK_THAT(named.err, Catch::Contains("left out the 1 mask(s) beside their images") &&
                            Catch::Contains("(<stem>-gt.*, --mask-suffix)"));
  CHECK_FALSE(fs::exists(dir / "out2" / (id + "-gt_mask.png")));
}

TEST_CASE("evaluate --labels on a folder of images and their masks scores the images alone", "[evaluate]") {
  TRAINER_REQUIRE_DSB();
  // The training folder's masks beside the images were taken for images without label files.
  const Fixture& f = fixture();
  const fs::path dir = case_dir("evaluate_labels_together");
  fs::create_directories(dir / "in");
  const std::string id = kIds[0];
  link_image_and_mask(id, dir / "in");
  const Run r = run_trainer("evaluate --checkpoint " + f.checkpoint.string() + " --images " + (dir / "in").string() +
                                " --labels " + kFlat + "/labels --gpus cpu",
                            dir);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("left out the 1 mask(s) beside their images in '" + (dir / "in").string()));
  CHECK_THAT(r.out, Catch::Contains("1 image"));
}

TEST_CASE("predict --tiles and evaluate --tiles work at each image's own size and agree", "[predict][evaluate][tiling]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const fs::path dir = case_dir("tiles");
  fs::create_directories(dir / "dsb");
  fs::create_directories(dir / "images");
  for (const auto& id : kNativeIds) {
    fs::create_directory_symlink(kNative + "/" + id, dir / "dsb" / id);
    fs::create_symlink(kNative + "/" + id + "/images/" + id + ".png", dir / "images" / (id + ".png"));
  }
  const Run p = run_trainer("predict --checkpoint " + f.checkpoint.string() + " -i " + (dir / "images").string() +
                                " -o " + (dir / "masks").string() + " --tiles --tile-overlap 0.3 --batch-size 3 --gpus cpu:2 --instances",
                            dir);
  INFO(p.out << p.err);
  REQUIRE(p.code == 0);
  CHECK_THAT(p.err, Catch::Contains("in tiles of 64x64 (the model's input), overlap 0.3, gaussian blend"));
  const fs::path csv = dir / "scores.csv";
  const Run e = run_trainer("evaluate --checkpoint " + f.checkpoint.string() + " --native " + (dir / "dsb").string() +
                                " --csv " + csv.string() + " --tiles --tile-overlap 0.3 --batch-size 2 --gpus cpu",
                            dir);
  INFO(e.out << e.err);
  REQUIRE(e.code == 0);
  CHECK_THAT(e.out, Catch::Contains("pixel metrics at each image's own size, in tiles: loss: "));
  const auto rows = read_csv(csv);
  REQUIRE(rows.size() == 3);
  long foreground = 0;
  for (size_t i = 0; i < kNativeIds.size(); ++i) {
    const std::string& id = kNativeIds[i];
    const cv::Mat image = cv::imread(kNative + "/" + id + "/images/" + id + ".png", cv::IMREAD_UNCHANGED);
    const cv::Mat mask = cv::imread((dir / "masks" / (id + "_mask.png")).string(), cv::IMREAD_UNCHANGED);
    REQUIRE(mask.size() == image.size());
    foreground += cv::countNonZero(mask);
    // evaluate's predicted nuclei are predict's instances (other towers and batches: the same tiles, the same
    // sums), the mask's foreground each.
    const cv::Mat labels = cv::imread((dir / "masks" / (id + "_instances.png")).string(), cv::IMREAD_UNCHANGED);
    REQUIRE(labels.type() == CV_16UC1);
    CHECK(cv::countNonZero((labels != 0) != (mask != 0)) == 0);
    double n = 0;
    cv::minMaxLoc(labels, nullptr, &n);
    CHECK(rows[i + 1][0] == id);
    CHECK(std::stoi(rows[i + 1][2]) == int(n));
    CHECK(distinct_labels(labels) == int(n));
  }
  CHECK(foreground > 0);
}
