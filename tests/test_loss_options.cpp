// training.loss in Keras's forms: class names, the mapping with from_logits
// (a model whose last layer outputs logits trains exactly as one ending in
// the sigmoid or softmax, and exports probabilities) and
// SparseCategoricalCrossentropy's ignore_class (Keras 3's masked mean over
// the batch's counted pixels, the same on any number of towers, with the
// ignored pixels left out of the metrics).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <opencv2/dnn.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>

#include "config/config.h"
#include "data/affine_augmentation.h"
#include "data/image_decode.h"
#include "nn/onnx_export.h"
#include "process_testing.h"
#include "tiny_model.h"
#include "train/loss.h"
#include "train/resume_check.h"
#include "train/trainer.h"
#include "train/tta.h"
#include "data_testing.h"

namespace fs = std::filesystem;
using namespace trainer;
using namespace trainer::testing;
using testing::tiny_class_data;
using testing::tiny_classes_config;
using testing::temp_dir;

namespace {

/// tiny_classes_config's training section with `loss: <loss>`.
Config classes_config(int classes, const std::string& loss, const std::string& last_activation) {
  return parse_config(tiny_classes_config(classes, loss, last_activation), "classes.yaml");
}

LossConfig parse_loss(const std::string& loss) {
  return parse_config(tiny_classes_config(3, loss), "classes.yaml").training.loss;
}

/// The mean over the counted pixels of samples [lo, hi) of -log p(true class),
/// from probabilities [N, H, W, K] and masks [N, H, W, 1]; the count in `counted`.
double mean_counted_cross_entropy(const Tensor& p, const Tensor& masks, int lo, int hi, double& counted) {
  const int k = p.shape().c;
  const size_t m = masks.shape().sample_numel();
  double sum = 0;
  counted = 0;
  for (int s = lo; s < hi; ++s)
    for (size_t i = 0; i < m; ++i) {
      const float t = masks.sample(s)[i];
      if (t == kIgnoredPixel) continue;
      sum -= std::log(double(p.sample(s)[i * size_t(k) + size_t(t)]));
      counted += 1;
    }
  return counted > 0 ? sum / counted : 0.0;
}

/// tiny_classes_config(3) with ignore_class 255, without its BatchNormalization
/// (so the training forward is predict's, and a step's loss can be computed
/// from predictions), and data.augmentation `augmentation` unless empty.
Config ignoring_config_without_bn(const std::string& augmentation) {
  std::string text = tiny_classes_config(3, "{type: SparseCategoricalCrossentropy, ignore_class: 255}");
  const std::string bn = "    - {name: bn1, type: BatchNormalization, synchronized: true}\n",
                    cat = "inputs: [u1, bn1]", data = "data: {images: unused, masks: unused";
  REQUIRE(text.find(bn) != std::string::npos);
  text.erase(text.find(bn), bn.size());
  text.replace(text.find(cat), cat.size(), "inputs: [u1, c1]");
  if (!augmentation.empty()) text.replace(text.find(data), data.size(), data + ", augmentation: " + augmentation);
  return parse_config(text, "classes.yaml");
}

std::vector<int> all_samples(const Dataset& d) {
  std::vector<int> all(size_t(d.size()));
  for (int i = 0; i < d.size(); ++i) all[size_t(i)] = i;
  return all;
}

}  // namespace

TEST_CASE("training.loss takes Keras's class names and its mapping with from_logits and ignore_class",
          "[config][loss]") {
  CHECK(parse_loss("SparseCategoricalCrossentropy").kind == LossKind::SparseCategoricalCrossentropy);
  const LossConfig m = parse_loss("{type: SparseCategoricalCrossentropy, from_logits: true, ignore_class: 255, "
                                  "reduction: sum_over_batch_size, axis: -1, name: scce}");
  CHECK(m.kind == LossKind::SparseCategoricalCrossentropy);
  CHECK(m.from_logits);
  CHECK(m.ignore_class == 255);
  CHECK_THAT(m.where, Catch::StartsWith("classes.yaml:") && Catch::EndsWith(": training.loss"));
  const LossConfig d = parse_loss("{type: sparse_categorical_crossentropy, ignore_class: null}");
  CHECK_FALSE(d.from_logits);
  CHECK(d.ignore_class == -1);
  CHECK(parse_loss("{type: CategoricalCrossentropy, label_smoothing: 0}").kind == LossKind::CategoricalCrossentropy);
  CHECK(parse_loss("sparse_categorical_crossentropy").ignore_class == -1);

  const auto fails = [](const std::string& loss) {
    try {
      parse_loss(loss);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    FAIL("accepted loss: " << loss);
    return std::string();
  };
  CHECK_THAT(fails("binary_crosentropy"),
             Catch::Contains("training: 'loss' is") && Catch::Contains("did you mean 'binary_crossentropy'"));
  CHECK_THAT(fails("{type: Dice, smooth: 1}"), Catch::Contains("unknown key 'smooth'"));  // Keras 3's Dice has none
  CHECK_THAT(fails("{class_name: BinaryCrossentropy, config: {from_logits: true}}"),
             Catch::Contains("Keras's serialized form") && Catch::Contains("{type: BinaryCrossentropy"));
  CHECK_THAT(fails("{name: binary_crossentropy}"), Catch::Contains("'type' is required"));
  CHECK_THAT(fails("{type: BinaryCrossentropy, ignore_class: 255}"),
             Catch::Contains("ignore_class") && Catch::Contains("SparseCategoricalCrossentropy's"));
  CHECK_THAT(fails("{type: SparseCategoricalCrossentropy, ignore_class: -1}"),
             Catch::Contains("a mask image cannot hold") && Catch::Contains("ignore_class: 255"));
  CHECK_THAT(fails("{type: SparseCategoricalCrossentropy, ignore_class: 70000}"), Catch::Contains("65535"));
  CHECK_THAT(fails("{type: SparseCategoricalCrossentropy, ignore_class: void}"),
             Catch::Contains("must be a class index"));
  CHECK_THAT(fails("{type: BinaryCrossentropy, reduction: sum}"), Catch::Contains("only Keras's default"));
  CHECK_THAT(fails("{type: BinaryCrossentropy, axis: 1}"), Catch::Contains("must be -1"));
  CHECK_THAT(fails("{type: BinaryCrossentropy, from_logit: true}"), Catch::Contains("did you mean 'from_logits'"));
  CHECK_THAT(fails("{type: SparseCategoricalCrossentropy, ignore_clas: 255}"),
             Catch::Contains("did you mean 'ignore_class'") && Catch::Contains("reduction"));
  CHECK(parse_loss("{type: BinaryCrossentropy, reduction: mean}").kind == LossKind::BinaryCrossentropy);
  CHECK_THAT(fails("[binary_crossentropy]"), Catch::Contains("a loss name") && Catch::Contains("or a mapping"));
}

TEST_CASE("from_logits: a model that outputs logits trains exactly as one ending in the sigmoid or softmax",
          "[loss][towers]") {
  const Dataset classes = tiny_class_data(), binary = testing::tiny_data();
  struct Pair {
    Config fused, logits;
    const Dataset* data;
  };
  const std::vector<Pair> pairs = {
      {classes_config(3, "sparse_categorical_crossentropy", "softmax"),
       classes_config(3, "{type: SparseCategoricalCrossentropy, from_logits: true}", "linear"), &classes},
      {classes_config(1, "binary_crossentropy", "sigmoid"),
       classes_config(1, "{type: BinaryCrossentropy, from_logits: true}", "linear"), &binary}};
  for (const Pair& p : pairs) {
    Trainer a(p.fused, 2, 1), b(p.logits, 2, 1);
    REQUIRE(a.params(0) == b.params(0));
    for (const std::vector<int>& batch : {std::vector<int>{0, 1, 2, 3, 4}, std::vector<int>{5, 6, 7, 8, 9}}) {
      const BatchStats sa = a.train_step(*p.data, batch), sb = b.train_step(*p.data, batch);
      CHECK(sa.loss() == sb.loss());
      CHECK(sa.counts.v == sb.counts.v);
    }
    CHECK(a.params(0) == b.params(0));
    CHECK(a.params(1) == b.params(0));
    const Tensor pa = a.predict(p.data->images, 4), pb = b.predict(p.data->images, 4);
    REQUIRE(pa.shape() == pb.shape());
    CHECK(std::equal(pa.data(), pa.data() + pa.numel(), pb.data()));  // probabilities from both
  }
}

TEST_CASE("from_logits must match the last layer, and the error names the fix", "[config][loss]") {
  const auto check = [](const std::string& loss, const std::string& activation, int classes = 3) {
    Trainer t(classes_config(classes, loss, activation), 1, 1);
  };
  CHECK_THROWS_WITH(check("{type: SparseCategoricalCrossentropy, from_logits: true}", "softmax"),
                    Catch::StartsWith("classes.yaml:") && Catch::Contains("layer 'out' (Conv2D) ends in softmax") &&
                        Catch::Contains("from_logits: true") && Catch::Contains("remove the activation"));
  CHECK_THROWS_WITH(check("{type: BinaryCrossentropy, from_logits: true}", "sigmoid", 1),
                    Catch::Contains("ends in sigmoid") && Catch::Contains("set from_logits: false"));
  CHECK_THROWS_WITH(check("{type: BinaryCrossentropy, from_logits: true}", "relu", 1),
                    Catch::Contains("layer 'out' (Conv2D) ends in relu"));
  CHECK_THROWS_WITH(check("sparse_categorical_crossentropy", "linear"),
                    Catch::Contains("end in a softmax") && Catch::Contains("add from_logits: true to training.loss") &&
                        Catch::Contains("{type: SparseCategoricalCrossentropy, from_logits: true}"));
  CHECK_THROWS_WITH(check("dice", "linear", 1),
                    Catch::Contains("end in a sigmoid") && Catch::Contains("{type: dice, from_logits: true}"));
  CHECK_NOTHROW(check("{type: dice, from_logits: true}", "linear", 1));
  // A sigmoid before layers that pass values on still makes the output: refused at its layer.
  std::string behind = tiny_classes_config(1, "{type: BinaryCrossentropy, from_logits: true}", "sigmoid");
  behind.replace(behind.find("data:"), 5,
                 "    - {name: drop, type: Dropout, rate: 0.1}\n    - {name: same, type: Activation, "
                 "activation: linear}\ndata:");
  CHECK_THROWS_WITH(Trainer(parse_config(behind, "behind.yaml"), 1, 1),
                    Catch::Contains("layer 'out' (Conv2D) ends in sigmoid, which makes the model's output"));
}

TEST_CASE("exported ONNX of a from_logits model ends in its loss's sigmoid or softmax", "[export][loss]") {
  const fs::path dir = temp_dir("from_logits_onnx");
  for (int classes : {1, 3}) {
    const Config config = classes_config(
        classes, classes == 1 ? "{type: BinaryCrossentropy, from_logits: true}" : "{type: SparseCategoricalCrossentropy, from_logits: true}",
        "linear");
    const Dataset data = classes == 1 ? testing::tiny_data() : tiny_class_data();
    Trainer t(config, 1, 1);
    t.train_step(data, {0, 1, 2, 3, 4});
    const Model model(config.model, config.path);
    const fs::path path = dir / ("net" + std::to_string(classes) + ".onnx");
    export_onnx(model, t.weights(), path.string(),
                classes == 1 ? OutputActivation::Sigmoid : OutputActivation::Softmax);
    cv::dnn::Net net = cv::dnn::readNetFromONNX(path.string());
    net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
    net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
    const Tensor want = t.predict(data.images, 4);  // probabilities [N, H, W, K]
    const Shape s = want.shape();
    // NHWC images -> an NCHW blob, and the NCHW output compared per element.
    const int dims[] = {s.n, 3, s.h, s.w};
    cv::Mat blob(4, dims, CV_32F);
    for (int n = 0; n < s.n; ++n)
      for (int c = 0; c < 3; ++c)
        for (int i = 0; i < s.h * s.w; ++i)
          blob.ptr<float>()[(size_t(n) * 3 + size_t(c)) * size_t(s.h * s.w) + size_t(i)] =
              data.images.sample(n)[size_t(i) * 3 + size_t(c)];
    net.setInput(blob, "image");
    const cv::Mat got = net.forward("probability");
    REQUIRE(got.total() == want.numel());
    double worst = 0;
    for (int n = 0; n < s.n; ++n)
      for (int c = 0; c < s.c; ++c)
        for (int i = 0; i < s.h * s.w; ++i)
          worst = std::max(worst, double(std::abs(
                                      got.ptr<float>()[(size_t(n) * size_t(s.c) + size_t(c)) * size_t(s.h * s.w) + size_t(i)] -
                                      want.sample(n)[size_t(i) * size_t(s.c) + size_t(c)])));
    CHECK(worst < 1e-5);
  }
  fs::remove_all(dir);
}

TEST_CASE("ignore_class: the loss is the mean over the batch's counted pixels, as Keras 3's", "[loss][categorical]") {
  // N 2, H 2, W 3, K 3; sample 0 ignores 2 pixels, sample 1 one.
  Tensor z(Shape{2, 2, 3, 3}), y(Shape{2, 2, 3, 1});
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.f, 2.f);
  for (size_t i = 0; i < z.numel(); ++i) z.data()[i] = g(rng);
  const float classes[] = {0, kIgnoredPixel, 2, 1, kIgnoredPixel, 0, 2, 2, 1, kIgnoredPixel, 0, 1};
  std::copy(std::begin(classes), std::end(classes), y.data());
  double sum = 0;
  int counted = 0;
  for (int i = 0; i < 12; ++i) {
    if (classes[i] == kIgnoredPixel) continue;
    const float* zi = z.data() + 3 * i;
    double denominator = 0;
    for (int j = 0; j < 3; ++j) denominator += std::exp(double(zi[j]));
    sum += std::log(denominator) - zi[int(classes[i])];
    ++counted;
  }
  REQUIRE(counted == 9);
  CHECK(counted_pixels(y.data(), y.numel(), 3) == 9);
  const double w = counted_pixel_weight(2, 9);
  CHECK(w == Approx(2.0 / 9.0));
  // Keras 3: sum(loss * mask * total / valid) / total = sum over counted pixels / valid.
  CHECK(loss_sum(LossKind::SparseCategoricalCrossentropy, z, y, nullptr, w) / 2 == Approx(sum / 9).epsilon(1e-6));
  Tensor grad;
  const double l = loss_sum(LossKind::SparseCategoricalCrossentropy, z, y, &grad, w);
  for (int i = 0; i < 12; ++i)
    for (int j = 0; j < 3; ++j) {
      const size_t e = size_t(3 * i + j);
      if (classes[i] == kIgnoredPixel) {
        CHECK(grad.data()[e] == 0.f);
        continue;
      }
      Tensor zz = z;
      const float h = 1e-2f;
      zz.data()[e] += h;
      const double up = loss_sum(LossKind::SparseCategoricalCrossentropy, zz, y, nullptr, w);
      zz.data()[e] -= 2 * h;
      const double down = loss_sum(LossKind::SparseCategoricalCrossentropy, zz, y, nullptr, w);
      CHECK(grad.data()[e] == Approx((up - down) / (2 * h)).margin(1e-4));
    }
  CHECK(l > 0);
  // Every pixel ignored: loss 0 and no gradient (Keras's divide_no_nan).
  Tensor none(y.shape());
  for (size_t i = 0; i < none.numel(); ++i) none.data()[i] = kIgnoredPixel;
  CHECK(counted_pixels(none.data(), none.numel(), 3) == 0);
  CHECK(counted_pixel_weight(2, 0) == 0.0);
  CHECK(loss_sum(LossKind::SparseCategoricalCrossentropy, z, none, &grad, 0.0) == 0.0);
  for (size_t i = 0; i < grad.numel(); ++i) REQUIRE(grad.data()[i] == 0.f);
  // Without ignored pixels the weight is 1 / (H W): the per-sample mean.
  Tensor full(y.shape());
  for (size_t i = 0; i < full.numel(); ++i) full.data()[i] = float(i % 3);
  CHECK(counted_pixel_weight(2, double(counted_pixels(full.data(), full.numel(), 3))) == 1.0 / 6.0);
  full.data()[4] = 3;  // not a class of 3: not counted, as the kernels do not count it
  CHECK(counted_pixels(full.data(), full.numel(), 3) == 11);
}

TEST_CASE("class masks with ignore_class read its pixels as ignored, and a stray 255 names ignore_class",
          "[data][categorical]") {
  const fs::path dir = temp_dir("ignore_masks");
  cv::Mat m8 = (cv::Mat_<uint8_t>(2, 3) << 0, 1, 255, 2, 255, 0);
  const std::string p8 = (dir / "m8.png").string();
  cv::imwrite(p8, m8);
  float out[6];
  decode_class_mask(p8, 2, 3, 3, out, 255);
  const float want[] = {0, 1, kIgnoredPixel, 2, kIgnoredPixel, 0};
  CHECK(std::equal(out, out + 6, want));
  CHECK_THROWS_WITH(decode_class_mask(p8, 2, 3, 3, out),
                    Catch::Contains("m8.png") && Catch::Contains("holds class 255") &&
                        Catch::Contains("ignore_class: 255"));
  // An ignored class among the model's classes, and a value the file's type cannot hold.
  decode_class_mask(p8, 2, 3, 256, out, 0);
  const float zero_ignored[] = {kIgnoredPixel, 1, 255, 2, 255, kIgnoredPixel};
  CHECK(std::equal(out, out + 6, zero_ignored));
  CHECK_THROWS_WITH(decode_class_mask(p8, 2, 3, 3, out, 300),
                    Catch::Contains("holds class 255") && Catch::Contains("ignore_class 300 cannot occur in this 8-bit"));
  // A 16-bit mask ignoring 65535, resized nearest (each pixel doubled).
  cv::Mat m16 = (cv::Mat_<uint16_t>(1, 2) << 65535, 4);
  const std::string p16 = (dir / "m16.png").string();
  cv::imwrite(p16, m16);
  float wide[4];
  decode_class_mask(p16, 1, 4, 5, wide, 65535);
  const float want16[] = {kIgnoredPixel, kIgnoredPixel, 4, 4};
  CHECK(std::equal(wide, wide + 4, want16));
  Tensor masks(Shape{1, 2, 3, 1});
  std::copy(want, want + 6, masks.data());
  CHECK(class_pixel_counts(masks, 4) == std::vector<size_t>{2, 1, 1, 0});  // ignored pixels in no class
  // Only ignored pixels: nothing to check against the classes.
  cv::imwrite(p8, cv::Mat(2, 3, CV_8U, cv::Scalar(255)));
  decode_class_mask(p8, 2, 3, 3, out, 255);
  for (float v : out) CHECK(v == kIgnoredPixel);
  fs::remove_all(dir);
}

TEST_CASE("ignore_class: N CPU towers reach one tower's weights, and the loss and metrics leave the pixels out",
          "[towers][categorical][multitower]") {
  const Config config = classes_config(3, "{type: SparseCategoricalCrossentropy, ignore_class: 255}", "softmax");
  const Dataset data = testing::tiny_ignored_class_data();
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}, {3, 9}};
  const std::vector<int> all = all_samples(data);
  double counted_pixels = 0;
  for (int s = 0; s < data.size(); ++s)
    for (size_t i = 0; i < data.masks.shape().sample_numel(); ++i) counted_pixels += data.masks.sample(s)[i] >= 0;
  REQUIRE(counted_pixels < 13.0 * 16 * 16);
  std::vector<std::vector<float>> weights;
  std::vector<BatchStats> evals;
  for (int towers : {1, 2, 3}) {
    Trainer t(config, towers, 1);
    for (int epoch = 0; epoch < 3; ++epoch)
      for (const auto& b : batches) t.train_step(data, b);
    weights.push_back(t.params(0));
    evals.push_back(t.evaluate(data, all, 4));
    // val_loss: each batch of 4 the mean over its counted pixels, the batches weighted by their samples.
    const Tensor p = t.predict(data.images, 4);
    double want = 0, counted = 0;
    for (int lo = 0; lo < data.size(); lo += 4) {
      const int hi = std::min(data.size(), lo + 4);
      want += mean_counted_cross_entropy(p, data.masks, lo, hi, counted) * (hi - lo) / data.size();
    }
    CHECK(evals.back().loss() == Approx(want).epsilon(1e-4));
    double total = 0;
    for (int i = 0; i < 9; ++i) total += evals.back().counts.v[MetricCounts::kSize + size_t(i)];
    CHECK(total == counted_pixels);  // the ignored pixels count in no metric
    // TTA's path over the whole set as one batch: the mean over all counted pixels.
    const BatchStats tta = probability_stats(t, p, data.masks);
    CHECK(tta.loss() == Approx(mean_counted_cross_entropy(p, data.masks, 0, data.size(), counted)).epsilon(1e-4));
    CHECK(tta.counts.v == evals.back().counts.v);
  }
  for (size_t k = 1; k < weights.size(); ++k) {
    double worst = 0;
    for (size_t i = 0; i < weights[0].size(); ++i)
      worst = std::max(worst, std::abs(double(weights[k][i]) - weights[0][i]) /
                                  std::max(1.0, std::abs(double(weights[0][i]))));
    CHECK(worst < 2e-5);
    CHECK(evals[k].loss() == Approx(evals[0].loss()).epsilon(1e-5));
  }
}

TEST_CASE("ignore_class: a training step's loss is the mean over the global batch's counted pixels",
          "[loss][categorical][towers][multitower]") {
  const Config config = ignoring_config_without_bn("");
  Dataset data = testing::tiny_ignored_class_data();
  for (size_t i = 0; i < data.masks.shape().sample_numel(); ++i) data.masks.sample(12)[i] = kIgnoredPixel;
  for (int towers : {1, 2}) {
    Trainer t(config, towers, 1);
    // A batch whose pixels are all ignored: loss 0 and nothing learned.
    const std::vector<float> start = t.params(0);
    CHECK(t.train_step(data, {12}).loss() == 0.0);
    CHECK(t.params(0) == start);
    // An uneven batch (samples 1, 2 and 3 ignore 40, 80 and 120 pixels): the masked mean.
    const std::vector<int> batch = {3, 0, 1, 2, 5};
    const Tensor p = t.predict(data.images, 13);
    Dataset picked;
    picked.images = Tensor(Shape{5, 16, 16, 3});
    picked.masks = Tensor(Shape{5, 16, 16, 1});
    Tensor probs(Shape{5, 16, 16, 3});
    for (int k = 0; k < 5; ++k) {
      std::copy(data.masks.sample(batch[size_t(k)]), data.masks.sample(batch[size_t(k)]) + 256, picked.masks.sample(k));
      std::copy(p.sample(batch[size_t(k)]), p.sample(batch[size_t(k)]) + 768, probs.sample(k));
    }
    double counted = 0;
    const double want = mean_counted_cross_entropy(probs, picked.masks, 0, 5, counted);
    REQUIRE(counted == 5 * 256 - 240 - 40);
    CHECK(t.train_step(data, batch).loss() == Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("ignore_class with augmentation: the counted pixels are those of the warped masks", "[loss][augmentation][multitower]") {
  const Config config = ignoring_config_without_bn("{width_shift_range: 0.4, fill_mode: constant}");
  const Dataset data = testing::tiny_ignored_class_data();
  const std::vector<int> batch = {3, 0, 1, 2, 5};
  for (int towers : {1, 2}) {
    Trainer t(config, towers, 1);
    t.train_step(data, {4, 6});
    // The batch as the step sees it: each sample warped by its draw (no flips configured).
    const uint64_t step = uint64_t(t.iterations());
    Dataset warped;
    warped.images = Tensor(Shape{5, 16, 16, 3});
    warped.masks = Tensor(Shape{5, 16, 16, 1});
    double moved = 0;
    for (int k = 0; k < 5; ++k) {
      std::copy(data.images.sample(batch[size_t(k)]), data.images.sample(batch[size_t(k)]) + 768, warped.images.sample(k));
      std::copy(data.masks.sample(batch[size_t(k)]), data.masks.sample(batch[size_t(k)]) + 256, warped.masks.sample(k));
      const AffineDraw d = draw_affine(config.data.augmentation, 7, step, uint64_t(k), 16, 16);
      moved += std::abs(d.shift_x);
      apply_affine(config.data.augmentation, d, warped.images.sample(k), warped.masks.sample(k), 16, 16, 3);
    }
    REQUIRE(moved > 5);
    double counted = 0, unwarped = 0;
    const double want = mean_counted_cross_entropy(t.predict(warped.images, 5), warped.masks, 0, 5, counted);
    for (int k : batch) unwarped += double(counted_pixels(data.masks.sample(k), 256, 3));
    REQUIRE(counted != unwarped);  // the warp changed the count: the test tells the two apart
    CHECK(t.train_step(data, batch).loss() == Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("resuming with another from_logits or ignore_class reports it", "[loss][resume]") {
  const Config then = classes_config(3, "{type: SparseCategoricalCrossentropy, ignore_class: 255}", "softmax");
  const Config now = classes_config(3, "{type: SparseCategoricalCrossentropy, from_logits: true}", "linear");
  const std::vector<std::string> d = resume_differences(now, then, "last.h5");
  const auto has = [&](const std::string& line) { return std::find(d.begin(), d.end(), line) != d.end(); };
  CHECK(has("training.loss.ignore_class is null (the checkpoint's run used 255)"));
  CHECK(has("training.loss.from_logits is true (the checkpoint's run used false)"));
}

TEST_CASE("resuming with another focal alpha, one number or a list per class, reports it", "[loss][resume]") {
  const std::string focal = "{type: CategoricalFocalCrossentropy, alpha: ";
  auto differences = [&](const std::string& now, const std::string& then) {
    return resume_differences(classes_config(3, focal + now + "}", "softmax"),
                              classes_config(3, focal + then + "}", "softmax"), "last.h5");
  };
  using V = std::vector<std::string>;
  CHECK(differences("[5.0, 0.1, 1]", "[0.3, 2.0, 1]") ==
        V{"training.loss.alpha is [5, 0.1, 1] (the checkpoint's run used [0.3, 2, 1])"});
  CHECK(differences("0.3", "[0.3, 2.0, 1]") == V{"training.loss.alpha is 0.3 (the checkpoint's run used [0.3, 2, 1])"});
  CHECK(differences("0.3", "0.25") == V{"training.loss.alpha is 0.3 (the checkpoint's run used 0.25)"});
  CHECK(differences("[0.3, 2, 1]", "[0.3, 2.0, 1.0]").empty());
}

TEST_CASE("a fix shared by every bad mask is said once, after the list of files", "[data][categorical]") {
  const fs::path dir = temp_dir("shared_fix");
  fs::create_directories(dir / "images");
  fs::create_directories(dir / "masks");
  for (int i = 0; i < 3; ++i) {
    const std::string stem = "s" + std::to_string(i);
    cv::imwrite((dir / "images" / (stem + ".png")).string(), cv::Mat(4, 4, CV_8UC3, cv::Scalar(9, 9, 9)));
    cv::Mat m(4, 4, CV_8U, cv::Scalar(0));
    m.at<uint8_t>(i, 1) = 255;
    cv::imwrite((dir / "masks" / (stem + "_mask.png")).string(), m);
  }
  DataOptions o;
  o.images_dir = (dir / "images").string();
  o.masks_dir = (dir / "masks").string();
  o.height = o.width = 4;
  o.classes = 2;
  try {
    load_dataset(o);
    FAIL("the 0/255 masks loaded as 2 classes");
  } catch (const UserError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK_THAT(what, Catch::Contains("3 of 3 image/mask pairs cannot be used") && Catch::Contains("s0_mask.png") &&
                         Catch::Contains("s2_mask.png") && Catch::Contains("at pixel (x 1, y 2)") &&
                         Catch::Contains(". For each: the model has 2 classes (its output channels), so mask "
                                         "pixels must be 0..1; if 255 marks pixels to ignore"));
    // The shared reason and fix are said once.
    for (const char* part : {"if 255 marks", "the model has 2 classes"}) {
      size_t count = 0;
      for (size_t at = what.find(part); at != std::string::npos; at = what.find(part, at + 1)) ++count;
      INFO(part);
      CHECK(count == 1);
    }
  }
  fs::remove_all(dir);
}
