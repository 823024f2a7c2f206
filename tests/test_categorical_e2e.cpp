// A categorical U-Net end to end through the binary, on real DSB images with
// three-class masks (background, interior, boundary) made from their label
// images by labels_to_classes' library function: training and resuming,
// predict (class-index masks at each image's size, per-class probabilities,
// the overlay), evaluate (pixel metrics and per-class IoU; against label images the instance score too), export (OpenCV's
// dnn runs the softmax as Trainer::predict does), and the flags that do not
// apply to K classes exiting with 2 and the fix.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <opencv2/dnn.hpp>
#include <opencv2/imgcodecs.hpp>

#include "config/config.h"
#include "data/boundary_classes.h"
#include "data/boundary_objects.h"
#include "data/image_decode.h"
#include "dsb_testing.h"
#include "io/checkpoint.h"
#include "process_testing.h"
#include "train/instance_metrics.h"
#include "train/predict.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace trainer;
using namespace trainer::testing;

namespace {

const std::string kFlat = std::string(TRAINER_SOURCE_DIR) + "/../shared/data/dsb2018/flat";
constexpr int kImages = 16;

// A folder shared by the cases: links to the first kImages DSB images and
// labels, their three-class masks, and a run of a 64x64 U-Net
// with a 3-class softmax (20 epochs, resumed from last.h5 after 16).
struct Fixture {
  fs::path dir, images, masks, checkpoint;
  Fixture() {
    dir = temp_dir("categorical");
    images = dir / "images";
    masks = dir / "masks";
    fs::create_directories(images);
    fs::create_directories(dir / "labels");
    std::vector<std::string> ids;
    for (const auto& e : fs::directory_iterator(kFlat + "/train_im")) ids.push_back(e.path().stem().string());
    std::sort(ids.begin(), ids.end());
    ids.resize(kImages);
    for (const auto& id : ids) {
      fs::create_symlink(kFlat + "/train_im/" + id + ".png", images / (id + ".png"));
      fs::create_symlink(kFlat + "/labels/" + id + "_labels.png", dir / "labels" / (id + "_labels.png"));
    }
    convert_labels_to_classes((dir / "labels").string(), masks.string(), "_labels", "_mask", 2);
    std::ofstream(dir / "classes.yaml") << config(16);
    Run r = run_trainer("--config " + (dir / "classes.yaml").string() + " --gpus cpu", dir);
    if (r.code != 0) throw std::runtime_error("training failed: " + r.out + r.err);
    r = run_trainer("--config " + (dir / "classes.yaml").string() + " --gpus cpu --epochs 20 --resume " +
                        (dir / "run" / "last.h5").string(), dir);
    if (r.code != 0) throw std::runtime_error("resuming failed: " + r.out + r.err);
    checkpoint = dir / "run" / "final.h5";
  }
  ~Fixture() { fs::remove_all(dir); }

  std::string config(int epochs) const {
    return "model:\n  name: classes_unet\n  layers:\n" + small_unet_layers() +
           R"(    - {name: logits, type: Conv2D, filters: 3, kernel_size: 1}
    - {name: out, type: Activation, activation: softmax}
data:
  images: )" + images.string() + R"(
  masks: )" + masks.string() + R"(
  validation_split: 0.25
training:
  epochs: )" + std::to_string(epochs) + R"(
  batch_size: 2
  seed: 1
  loss: sparse_categorical_crossentropy
  metrics: [accuracy, mean_iou, dice]
  optimizer: {type: Adam, learning_rate: 0.01}
  output_dir: )" + (dir / "run").string() + "\n";
  }
};

const Fixture& fixture() {
  static Fixture f;
  return f;
}

fs::path case_dir(const std::string& name) { return fresh_subdir(fixture().dir, name); }

std::vector<std::string> sorted_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// The largest difference between the probabilities OpenCV's dnn computes
/// from the ONNX file `onnx` and those of Trainer::predict with checkpoint's
/// weights, on the first two of the 64x64 images in `images`.
double onnx_difference(const fs::path& checkpoint, const fs::path& onnx, const fs::path& images_dir) {
  const Checkpoint ckpt = load_checkpoint(checkpoint.string());
  const Config config = parse_config(ckpt.config_yaml, checkpoint.string());
  Trainer trainer(config, 1, 2);
  trainer.load_weights(ckpt.weights, checkpoint.string());
  const std::vector<std::string> names = sorted_files(images_dir);
  const int n = 2;
  Tensor images(Shape{n, 64, 64, 3});
  for (int i = 0; i < n; ++i) decode_image((images_dir / names[size_t(i)]).string(), 64, 64, 3, images.sample(i));
  const Tensor want = trainer.predict(images, 2);  // [n, 64, 64, K]
  const int k = want.shape().c;

  cv::dnn::Net net = cv::dnn::readNetFromONNX(onnx.string());
  net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  net.setInput(cv::dnn::blobFromImages(std::vector<cv::Mat>{cv::Mat(64, 64, CV_32FC3, images.sample(0)),
                                                            cv::Mat(64, 64, CV_32FC3, images.sample(1))}),
               "image");
  const cv::Mat got = net.forward("probability");  // [n, K, 64, 64]
  REQUIRE(got.dims == 4);
  REQUIRE(got.size[1] == k);
  double worst = 0;
  for (int s = 0; s < n; ++s)
    for (int c = 0; c < k; ++c)
      for (int y = 0; y < 64; ++y)
        for (int x = 0; x < 64; ++x) {
          const float g = got.ptr<float>(s, c)[y * 64 + x];
          worst = std::max(worst, double(std::abs(g - want.sample(s)[(y * 64 + x) * k + c])));
        }
  return worst;
}

}  // namespace

TEST_CASE("a 3-class U-Net trains and resumes on DSB images with boundary masks", "[e2e][categorical]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const std::string log = slurp(f.dir / "run" / "log.csv");
  INFO(log);
  CHECK_THAT(log, Catch::Contains("val_mean_iou") && Catch::Contains("val_accuracy"));
  CHECK(std::count(log.begin(), log.end(), '\n') == 21);  // header and 20 epochs, the last 4 after the resume
  const Checkpoint c = load_checkpoint(f.checkpoint.string());
  CHECK(c.epoch == 20);
  CHECK(c.logs.at("val_mean_iou") > 0.4);  // more than all background (about 0.30 here)
  CHECK(c.logs.at("val_accuracy") > 0.5);
  CHECK(c.logs.at("loss") < std::log(3.0));  // below a uniform guess over the 3 classes
}

TEST_CASE("predict writes class-index masks, per-class probabilities and overlays", "[predict][categorical]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const fs::path out = case_dir("predict");
  Run r = run_trainer("predict --gpus cpu --checkpoint " + f.checkpoint.string() + " --input " + f.images.string() +
                          " --output " + out.string() + " --probabilities --overlay",
                      out);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::vector<std::string> images = sorted_files(f.images);
  size_t pngs = 0;
  for (const auto& name : sorted_files(out)) pngs += fs::path(name).extension() == ".png";
  CHECK(pngs == images.size() * 5);  // mask, 3 probabilities, overlay
  int nucleus_pixels = 0;
  for (const auto& name : images) {
    const std::string stem = fs::path(name).stem().string();
    const cv::Mat image = cv::imread((f.images / name).string(), cv::IMREAD_COLOR);
    const cv::Mat mask = cv::imread((out / (stem + "_mask.png")).string(), cv::IMREAD_UNCHANGED);
    REQUIRE(mask.type() == CV_8UC1);
    REQUIRE(mask.size() == image.size());
    double highest = 0;
    cv::minMaxLoc(mask, nullptr, &highest);
    CHECK(highest <= 2);
    nucleus_pixels += cv::countNonZero(mask);
    cv::Mat sum(image.size(), CV_32S, cv::Scalar(0));
    for (int c = 0; c < 3; ++c) {
      const cv::Mat p = cv::imread((out / (stem + "_prob_" + std::to_string(c) + ".png")).string(), cv::IMREAD_UNCHANGED);
      REQUIRE(p.size() == image.size());
      cv::Mat p32;
      p.convertTo(p32, CV_32S);
      sum += p32;
    }
    double lo = 0, hi = 0;
    cv::minMaxLoc(sum, &lo, &hi);
    CHECK(lo >= 253);  // 255 * (p0 + p1 + p2), each rounded
    CHECK(hi <= 257);
    CHECK(cv::imread((out / (stem + "_overlay.png")).string()).size() == image.size());
  }
  CHECK(nucleus_pixels > 0);  // the model does not predict background everywhere

  // Predicting the output folder into itself leaves out what this prediction wrote.
  for (const auto& name : images) fs::copy_file(f.images / name, out / name);
  r = run_trainer("predict --gpus cpu --checkpoint " + f.checkpoint.string() + " --input " + out.string() +
                      " --output " + out.string() + " --probabilities --overwrite",
                  out);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("Predicted " + std::to_string(images.size()) + " image(s)"));

  r = run_trainer("predict --gpus cpu --checkpoint " + f.checkpoint.string() + " --input " + f.images.string() +
                      " --output " + (out / "t").string() + " --threshold 0.3",
                  out);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--threshold applies to one-channel") && Catch::Contains("3 classes"));
}

TEST_CASE("evaluate a 3-class model against class masks: pixel metrics and per-class IoU",
          "[evaluate][categorical]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const fs::path out = case_dir("evaluate");
  Run r = run_trainer("evaluate --gpus cpu --checkpoint " + f.checkpoint.string() + " --images " + f.images.string() +
                          " --masks " + f.masks.string(),
                      out);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("mean_iou: ") && Catch::Contains("per-class IoU") && Catch::Contains(" 2: "));
  CHECK_THAT(r.out, !Catch::Contains("instance score"));

  // The same figure as Trainer::evaluate on the data loader's masks.
  const Checkpoint ckpt = load_checkpoint(f.checkpoint.string());
  const Config config = parse_config(ckpt.config_yaml, f.checkpoint.string());
  Trainer trainer(config, 1, 2);
  trainer.load_weights(ckpt.weights, f.checkpoint.string());
  DataOptions o;
  o.images_dir = f.images.string();
  o.masks_dir = f.masks.string();
  o.height = o.width = 64;
  o.classes = 3;
  const Dataset data = load_dataset(o);
  std::vector<int> all(size_t(data.size()));
  for (int i = 0; i < data.size(); ++i) all[size_t(i)] = i;
  const BatchStats s = trainer.evaluate(data, all, 4);
  char want[64];
  std::snprintf(want, sizeof want, "mean_iou: %.4f", s.counts.mean_iou());
  CHECK_THAT(r.out, Catch::Contains(want));

  r = run_trainer("evaluate --gpus cpu --checkpoint " + f.checkpoint.string() + " --images " + f.images.string() +
                      " --masks " + f.masks.string() + " --csv " + (out / "s.csv").string(),
                  out);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("drop --csv"));
  CHECK_FALSE(fs::exists(out / "s.csv"));
  r = run_trainer("evaluate --gpus cpu --checkpoint " + f.checkpoint.string() + " --images " + f.images.string() +
                      " --masks " + f.masks.string() + " --threshold 0.4",
                  out);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("drop --threshold"));
}

TEST_CASE("evaluate a 3-class boundary model against label images: its classes' metrics and the instance score",
          "[evaluate][categorical]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const fs::path out = case_dir("evaluate_labels");
  const std::string args = "evaluate --gpus cpu --checkpoint " + f.checkpoint.string() + " --images " +
                           f.images.string() + " --labels " + (f.dir / "labels").string();
  Run r = run_trainer(args + " --csv " + (out / "scores.csv").string(), out);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  // The pixel truth is labels_to_classes' at width 2, which made the training masks: the figures of --masks.
  const Run masks = run_trainer("evaluate --gpus cpu --checkpoint " + f.checkpoint.string() + " --images " +
                                    f.images.string() + " --masks " + f.masks.string(),
                                out);
  REQUIRE(masks.code == 0);
  auto line = [](const std::string& text, const std::string& start) {
    const size_t at = text.find(start);
    return at == std::string::npos ? std::string() : text.substr(at, text.find('\n', at) - at);
  };
  CHECK(line(r.out, "pixel metrics") == line(masks.out, "pixel metrics"));
  CHECK(line(r.out, "per-class IoU") == line(masks.out, "per-class IoU"));
  CHECK(line(r.out, "pixel metrics") != "");

  // The instance score: each image's class map at its own size, decoded into objects by boundary_objects.
  const Checkpoint ckpt = load_checkpoint(f.checkpoint.string());
  Trainer trainer(parse_config(ckpt.config_yaml, f.checkpoint.string()), 1, 2);
  trainer.load_weights(ckpt.weights, f.checkpoint.string());
  const std::vector<std::string> names = sorted_files(f.images);
  double score = 0;
  for (const std::string& name : names) {
    const std::string stem = fs::path(name).stem().string();
    const cv::Mat labels = cv::imread((f.dir / "labels" / (stem + "_labels.png")).string(), cv::IMREAD_UNCHANGED);
    Tensor image(Shape{1, 64, 64, 3});
    decode_image((f.images / name).string(), 64, 64, 3, image.sample(0));
    const cv::Mat classes = class_map(probability_map(trainer.predict(image, 1), 0, labels.size()));
    score += instance_score(labels, boundary_objects(classes)).score / double(names.size());
  }
  REQUIRE(score > 0.05);  // the fixture finds nuclei (0.158 when written): the comparison below is not of zeros
  char want[160];
  std::snprintf(want, sizeof want, "objects = interior components grown into the boundary; truth classes at "
                "--boundary-width 2): %.4f", score);
  CHECK_THAT(r.out, Catch::Contains(want));
  const std::string csv = slurp(out / "scores.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == kImages + 1);  // the header and a row per image

  // Another width makes other truth classes, so other pixel figures; the objects and their score stay.
  r = run_trainer(args + " --boundary-width 1", out);
  REQUIRE(r.code == 0);
  CHECK(line(r.out, "pixel metrics") != line(masks.out, "pixel metrics"));
  CHECK_THAT(r.out, Catch::Contains("--boundary-width 1): " + std::string(want).substr(std::string(want).size() - 6)));
  // The width only applies there.
  r = run_trainer("evaluate --gpus cpu --checkpoint " + f.checkpoint.string() + " --images " + f.images.string() +
                      " --masks " + f.masks.string() + " --boundary-width 1",
                  out);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("evaluated against masks: drop --boundary-width"));
  // Test-time augmentation: the objects of the averaged probabilities.
  r = run_trainer(args + " --tta", out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("objects = interior components grown into the boundary"));
}

TEST_CASE("a softmax model exports to ONNX and OpenCV dnn gives Trainer::predict's probabilities",
          "[export][categorical]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const fs::path out = case_dir("export");
  const Run r = run_trainer("export --checkpoint " + f.checkpoint.string() + " --output " + (out / "m.onnx").string(), out);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(onnx_difference(f.checkpoint, out / "m.onnx", f.images) <= 1e-4);
}

TEST_CASE("a logits model with an ignored class trains, evaluates, predicts and exports through the binary",
          "[e2e][categorical][loss]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const fs::path dir = case_dir("ignore");
  // Two classes (background, nucleus interior); the boundary pixels (class 2) become 255 and are ignored.
  fs::create_directories(dir / "masks");
  for (const auto& name : sorted_files(f.masks)) {
    cv::Mat m = cv::imread((f.masks / name).string(), cv::IMREAD_UNCHANGED);
    m.setTo(255, m == 2);
    cv::imwrite((dir / "masks" / name).string(), m);
  }
  std::string yaml = f.config(3);
  const auto replace = [&](const std::string& from, const std::string& to) {
    REQUIRE(yaml.find(from) != std::string::npos);
    yaml.replace(yaml.find(from), from.size(), to);
  };
  replace("    - {name: logits, type: Conv2D, filters: 3, kernel_size: 1}\n    - {name: out, type: Activation, "
          "activation: softmax}\n",
          "    - {name: logits, type: Conv2D, filters: 2, kernel_size: 1}\n");
  replace("loss: sparse_categorical_crossentropy",
          "loss: {type: SparseCategoricalCrossentropy, from_logits: true, ignore_class: 255}");
  replace(f.masks.string(), (dir / "masks").string());
  replace((f.dir / "run").string(), (dir / "run").string());
  std::ofstream(dir / "ignore.yaml") << yaml;
  Run r = run_trainer("--config " + (dir / "ignore.yaml").string() + " --gpus cpu", dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const fs::path checkpoint = dir / "run" / "final.h5";
  CHECK(load_checkpoint(checkpoint.string()).logs.at("val_loss") < std::log(2.0));

  r = run_trainer("evaluate --gpus cpu --checkpoint " + checkpoint.string() + " --images " + f.images.string() +
                      " --masks " + (dir / "masks").string(),
                  dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("per-class IoU") && Catch::Contains(" 1: "));

  r = run_trainer("predict --gpus cpu --checkpoint " + checkpoint.string() + " --input " + f.images.string() +
                      " --output " + (dir / "predicted").string(),
                  dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  for (const auto& name : sorted_files(dir / "predicted")) {
    double highest = 0;
    cv::minMaxLoc(cv::imread((dir / "predicted" / name).string(), cv::IMREAD_UNCHANGED), nullptr, &highest);
    CHECK(highest <= 1);
  }

  r = run_trainer("export --checkpoint " + checkpoint.string() + " --output " + (dir / "m.onnx").string(), dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(onnx_difference(checkpoint, dir / "m.onnx", f.images) <= 1e-4);  // the softmax is in the graph
}

TEST_CASE("binary 0/255 masks with ignore_class 255 warn that class 1 never occurs", "[e2e][categorical][loss]") {
  TRAINER_REQUIRE_DSB();
  const Fixture& f = fixture();
  const fs::path dir = case_dir("ignored_foreground");
  std::string yaml = f.config(1);
  const auto replace = [&](const std::string& from, const std::string& to) {
    REQUIRE(yaml.find(from) != std::string::npos);
    yaml.replace(yaml.find(from), from.size(), to);
  };
  replace("filters: 3, kernel_size: 1}", "filters: 2, kernel_size: 1}");
  replace("loss: sparse_categorical_crossentropy", "loss: {type: SparseCategoricalCrossentropy, ignore_class: 255}");
  replace(f.masks.string(), kFlat + "/train_mask");  // the DSB binary masks, 0 and 255
  replace((f.dir / "run").string(), (dir / "run").string());
  std::ofstream(dir / "binary.yaml") << yaml;
  const Run r = run_trainer("--config " + (dir / "binary.yaml").string() + " --gpus cpu", dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("class 1 of 2 occurs in none of the") &&
                        Catch::Contains("binary 0/255 masks? Train them with loss: binary_crossentropy"));
}

