// Categorical segmentation (K classes, a softmax last layer): the softmax
// cross-entropy against its formula and finite differences, the confusion
// counts and Keras's MeanIoU, class-index masks read from files, the checks
// of a config before training, and K-class training on towers (N towers
// reach one tower's weights).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>

#include "config/config.h"
#include "core/error.h"
#include "data/image_decode.h"
#include "layer_testing.h"
#include "process_testing.h"
#include "tiny_model.h"
#include "train/loss.h"
#include "train/metrics.h"
#include "train/trainer.h"
#include "train/tta.h"

namespace fs = std::filesystem;
using namespace trainer;
using trainer::testing::TempDir;

namespace {

/// [n, h, w, 1] of class indices 0..k-1 drawn from seed.
Tensor random_classes(Shape s, int k, unsigned seed) {
  std::mt19937 rng(seed);
  Tensor t(s);
  for (size_t i = 0; i < t.numel(); ++i) t.data()[i] = float(rng() % unsigned(k));
  return t;
}

/// The loss of loss_sum for categorical logits, written out: per sample the
/// mean over pixels of -log softmax(z)_t, summed over samples (double).
double naive_loss(const Tensor& z, const Tensor& y) {
  const Shape s = z.shape();
  const size_t pixels = size_t(s.h) * size_t(s.w);
  double total = 0;
  for (size_t p = 0; p < y.numel(); ++p) {
    const float* zp = z.data() + p * size_t(s.c);
    double sum = 0;
    for (int j = 0; j < s.c; ++j) sum += std::exp(double(zp[j]));
    total += -std::log(std::exp(double(zp[int(y.data()[p])])) / sum) / double(pixels);
  }
  return total;
}

/// Writes an 8-bit single-channel PNG of the given values (row-major, h x w) into dir and returns its path.
std::string write_mask(const fs::path& dir, const std::string& name, int h, int w, const std::vector<int>& v,
                       int type = CV_8UC1) {
  cv::Mat m(h, w, type);
  for (int i = 0; i < h * w; ++i) {
    if (type == CV_16UC1) m.at<uint16_t>(i / w, i % w) = uint16_t(v[size_t(i)]);
    else m.at<uint8_t>(i / w, i % w) = uint8_t(v[size_t(i)]);
  }
  const std::string path = (dir / name).string();
  REQUIRE(cv::imwrite(path, m));
  return path;
}

}  // namespace

TEST_CASE("sparse categorical cross-entropy is -log softmax of the true class, per sample mean", "[loss][categorical]") {
  CHECK(std::string(loss_name(LossKind::SparseCategoricalCrossentropy)) == "sparse_categorical_crossentropy");
  CHECK(std::string(loss_name(LossKind::CategoricalCrossentropy)) == "categorical_crossentropy");
  CHECK(is_categorical(LossKind::CategoricalCrossentropy));
  CHECK_FALSE(is_categorical(LossKind::BceDice));
  CHECK(loss_classes(LossKind::SparseCategoricalCrossentropy, Shape{1, 4, 4, 5}) == 5);
  CHECK(loss_classes(LossKind::BinaryCrossentropy, Shape{1, 4, 4, 1}) == 0);

  const Tensor z = testing::random_tensor(Shape{3, 4, 5, 4}, 11, -3.f, 3.f);
  const Tensor y = random_classes(Shape{3, 4, 5, 1}, 4, 12);
  const double want = naive_loss(z, y);
  CHECK(loss_sum(LossKind::SparseCategoricalCrossentropy, z, y, nullptr) == Approx(want).epsilon(1e-6));
  CHECK(loss_sum(LossKind::CategoricalCrossentropy, z, y, nullptr) == Approx(want).epsilon(1e-6));

  // Finite differences of the returned sum, every logit of the first sample and some of the others.
  Tensor g;
  loss_sum(LossKind::SparseCategoricalCrossentropy, z, y, &g);
  REQUIRE(g.shape() == z.shape());
  Tensor zz = z;
  for (size_t i = 0; i < z.numel(); i += (i < 80 ? 1 : 7)) {
    const float keep = zz.data()[i], h = 1e-2f;
    zz.data()[i] = keep + h;
    const double up = loss_sum(LossKind::SparseCategoricalCrossentropy, zz, y, nullptr);
    zz.data()[i] = keep - h;
    const double down = loss_sum(LossKind::SparseCategoricalCrossentropy, zz, y, nullptr);
    zz.data()[i] = keep;
    INFO("logit " << i);
    REQUIRE(g.data()[i] == Approx((up - down) / (2 * h)).margin(2e-4));
  }
  // A pixel's gradient sums to 0 over its classes (softmax minus one-hot).
  for (size_t p = 0; p < y.numel(); ++p) {
    double sum = 0;
    for (int j = 0; j < 4; ++j) sum += g.data()[p * 4 + size_t(j)];
    REQUIRE(sum == Approx(0.0).margin(1e-7));
  }
}

TEST_CASE("softmax cross-entropy stays finite for huge logits and refuses mismatched shapes", "[loss][categorical]") {
  Tensor z = testing::make_tensor({1, 1, 2, 3}, {1000.f, -1000.f, 0.f, -50.f, 80.f, 80.f});
  Tensor y = testing::make_tensor({1, 1, 2, 1}, {1.f, 2.f});
  // pixel 0: 1000 - (-1000) = 2000; pixel 1: log(e^80 + e^80 + e^-50) - 80 = log 2; mean over 2 pixels.
  CHECK(loss_sum(LossKind::SparseCategoricalCrossentropy, z, y, nullptr) == Approx((2000 + std::log(2.0)) / 2));
  Tensor g;
  loss_sum(LossKind::SparseCategoricalCrossentropy, z, y, &g);
  for (size_t i = 0; i < g.numel(); ++i) REQUIRE(std::isfinite(g.data()[i]));
  CHECK(g.data()[0] == Approx(0.5));   // softmax 1 at class 0, over 2 pixels
  CHECK(g.data()[1] == Approx(-0.5));  // the true class 1 gets probability 0
  CHECK(g.data()[5] == Approx(-0.25));  // class 2 of pixel 1: 1/2 - 1, over 2 pixels

  const Tensor wrong_c = random_classes(Shape{1, 1, 2, 3}, 3, 1);
  CHECK_THROWS_AS(loss_sum(LossKind::SparseCategoricalCrossentropy, z, wrong_c, nullptr), InternalError);
  const Tensor one = testing::make_tensor({1, 1, 2, 1}, {0.f, 1.f});
  CHECK_THROWS_AS(loss_sum(LossKind::SparseCategoricalCrossentropy, one, y, nullptr), InternalError);
}

TEST_CASE("categorical metrics count a confusion matrix: Keras's MeanIoU, per-class Dice, accuracy",
          "[metrics][categorical]") {
  // keras.metrics.MeanIoU(num_classes=2) on y_true [0, 0, 1, 1], y_pred [0, 1, 0, 1] gives 1/3.
  Tensor z = testing::make_tensor({1, 2, 2, 2}, {2, 1, 0, 3, 5, -1, -2, 0});
  Tensor y = testing::make_tensor({1, 2, 2, 1}, {0, 0, 1, 1});
  MetricCounts c(2);
  accumulate_metrics(z, y, c);
  CHECK(c.mean_iou() == Approx(1.0 / 3));
  CHECK(c.accuracy() == Approx(0.5));
  CHECK(c.dice() == Approx(0.5));
  CHECK(c.class_iou(0) == Approx(1.0 / 3));
  CHECK(c.value("mean_iou") == c.mean_iou());
  CHECK_THROWS_AS(c.value("precision"), InternalError);
  CHECK_THROWS_AS(c.class_iou(2), InternalError);

  // Against a brute-force count on random logits with ties (the first largest wins, as tf.argmax).
  const Shape s{2, 7, 9, 5};
  Tensor zr = testing::random_tensor(s, 21, -2.f, 2.f);
  for (size_t p = 0; p < zr.numel() / 5; p += 3) zr.data()[p * 5 + 3] = zr.data()[p * 5 + 1] = 9.f;  // tie 1 and 3
  const Tensor yr = random_classes(Shape{2, 7, 9, 1}, 5, 22);
  MetricCounts got(5);
  accumulate_metrics(zr, yr, got);
  accumulate_metrics(zr, yr, got);  // adds
  // want: the first of equal logits wins; last: the last would (which the ties make differ).
  std::vector<double> want(25, 0), last(25, 0);
  for (size_t p = 0; p < yr.numel(); ++p) {
    const float* zp = zr.data() + p * 5;
    int best = 0, late = 0;
    for (int j = 1; j < 5; ++j) {
      if (zp[j] > zp[best]) best = j;
      if (zp[j] >= zp[late]) late = j;
    }
    want[size_t(yr.data()[p]) * 5 + size_t(best)] += 2;
    last[size_t(yr.data()[p]) * 5 + size_t(late)] += 2;
  }
  REQUIRE(want != last);
  for (size_t i = 0; i < 25; ++i) REQUIRE(got.v[MetricCounts::kSize + i] == want[i]);

  // A class in neither truth nor prediction is left out of the means.
  MetricCounts absent(3);
  accumulate_metrics(testing::make_tensor({1, 1, 2, 3}, {5, 0, 0, 0, 5, 0}),
                     testing::make_tensor({1, 1, 2, 1}, {0, 0}), absent);
  CHECK(std::isnan(absent.class_iou(2)));
  CHECK(absent.class_iou(1) == 0.0);
  CHECK(absent.mean_iou() == Approx(0.25));  // class 0: 1 / 2, class 1: 0
  CHECK(absent.accuracy() == Approx(0.5));
  CHECK(MetricCounts(3).mean_iou() == 0.0);

  MetricCounts binary, four(4);
  four.v[MetricCounts::kSize] = 1;
  CHECK_THROWS_AS(got.add(four), InternalError);
  got.add(MetricCounts(4));  // zero counts of another layout add nothing
  binary.add(got);  // empty counts take the classes of what they are given
  CHECK(binary.classes() == 5);
  CHECK(binary.mean_iou() == got.mean_iou());
}

TEST_CASE("class masks are read as class indices, and a value beyond the classes names the fix", "[data][categorical]") {
  TempDir dir("class_masks");
  const std::vector<int> v = {0, 1, 2, 1, 2, 2, 0, 0, 1, 1, 1, 0, 0, 2, 0, 1};
  std::vector<float> out(16);
  CHECK(decode_class_mask(write_mask(dir.root, "a.png", 4, 4, v), 4, 4, 3, out.data()) == cv::Size(4, 4));
  for (size_t i = 0; i < 16; ++i) REQUIRE(out[i] == float(v[i]));
  CHECK(decode_class_mask(write_mask(dir.root, "b16.png", 4, 4, v, CV_16UC1), 4, 4, 3, out.data()) == cv::Size(4, 4));
  for (size_t i = 0; i < 16; ++i) REQUIRE(out[i] == float(v[i]));
  // Nearest-neighbour resizing keeps indices (no value between classes appears).
  std::vector<float> small(4);
  decode_class_mask((dir.root / "a.png").string(), 2, 2, 3, small.data());
  for (float x : small) CHECK((x == 0.f || x == 1.f || x == 2.f));

  std::vector<int> bad = v;
  bad[9] = 3;  // x 1, y 2
  const std::string bad_path = write_mask(dir.root, "bad.png", 4, 4, bad);
  CHECK_THROWS_WITH(decode_class_mask(bad_path, 4, 4, 3, out.data()),
                    Catch::Contains("bad.png") && Catch::Contains("holds class 3 at pixel (x 1, y 2)") &&
                        Catch::Contains("0..2"));
  std::vector<int> label_image = v;
  label_image[4] = 27;  // a 16-bit instance label image given as class masks
  CHECK_THROWS_WITH(decode_class_mask(write_mask(dir.root, "l16.png", 4, 4, label_image, CV_16UC1), 4, 4, 3,
                                      out.data()),
                    Catch::Contains("holds class 27") && Catch::Contains("labels_to_classes"));
  std::vector<int> binary(16, 0);
  binary[5] = 255;
  CHECK_THROWS_WITH(decode_class_mask(write_mask(dir.root, "bin.png", 4, 4, binary), 4, 4, 3, out.data()),
                    Catch::Contains("binary 0/255") && Catch::Contains("binary_crossentropy"));
  // A JPEG class mask (0/1/2 saved as JPEG came back with 3s): the cause is named.
  CHECK_THROWS_WITH(decode_class_mask(write_mask(dir.root, "lossy.jpg", 4, 4, std::vector<int>(16, 9)), 4, 4, 3,
                                      out.data()),
                    Catch::Contains("lossy.jpg") && Catch::Contains("save the class masks as PNG"));

  // Gray saved as RGB is read; a colour image (e.g. a palette PNG) is not.
  cv::Mat gray(4, 4, CV_8UC1), rgb;
  for (int i = 0; i < 16; ++i) gray.at<uint8_t>(i / 4, i % 4) = uint8_t(v[size_t(i)]);
  cv::cvtColor(gray, rgb, cv::COLOR_GRAY2BGR);
  REQUIRE(cv::imwrite((dir.root / "rgb.png").string(), rgb));
  decode_class_mask((dir.root / "rgb.png").string(), 4, 4, 3, out.data());
  for (size_t i = 0; i < 16; ++i) REQUIRE(out[i] == float(v[i]));
  rgb.at<cv::Vec3b>(0, 0) = cv::Vec3b(0, 0, 1);
  REQUIRE(cv::imwrite((dir.root / "colour.png").string(), rgb));
  CHECK_THROWS_WITH(decode_class_mask((dir.root / "colour.png").string(), 4, 4, 3, out.data()),
                    Catch::Contains("colour image") && Catch::Contains("palette"));
}

TEST_CASE("a categorical config is checked before training: classes, softmax, metrics", "[config][categorical]") {
  auto check = [](const std::string& yaml) {
    const Config c = parse_config(yaml, "classes.yaml");
    Model m(c.model, c.path);
    validate_for_training(c, m);
    return m.output_is_logits();
  };
  CHECK(check(testing::tiny_classes_config(3)));
  CHECK(check(testing::tiny_classes_config(2, "categorical_crossentropy")));
  CHECK_THROWS_WITH(check(testing::tiny_classes_config(1)), Catch::Contains("one channel per class") &&
                                                  Catch::Contains("binary_crossentropy with a sigmoid"));
  CHECK_THROWS_WITH(check(testing::tiny_classes_config(3, "sparse_categorical_crossentropy", "sigmoid")),
                    Catch::Contains("end in a softmax") && Catch::Contains("activation: softmax"));
  CHECK_THROWS_WITH(check(testing::tiny_classes_config(3, "binary_crossentropy", "sigmoid")),
                    Catch::Contains("masks of 3 classes, use loss: sparse_categorical_crossentropy"));
  CHECK_THROWS_WITH(check(testing::tiny_classes_config(1, "binary_crossentropy", "softmax")),
                    Catch::Contains("replace its softmax"));
  CHECK_THROWS_WITH(check(testing::tiny_classes_config(257)), Catch::Contains("2 <= K <= 256"));
  std::string with_precision = testing::tiny_classes_config(3);
  with_precision.replace(with_precision.find("[accuracy,"), 10, "[precision,");
  CHECK_THROWS_WITH(check(with_precision), Catch::StartsWith("classes.yaml:") &&
                                               Catch::Contains(": training.metrics: 'precision' is for binary masks"));
  std::string with_binary_iou = testing::tiny_classes_config(3);  // Keras's class name, logged as binary_io_u
  with_binary_iou.replace(with_binary_iou.find("[accuracy,"), 10, "[BinaryIoU,");
  CHECK_THROWS_WITH(check(with_binary_iou), Catch::Contains("'binary_io_u' is for binary masks"));
  std::string keras_name = testing::tiny_classes_config(3);
  keras_name.replace(keras_name.find("[accuracy,"), 10, "[sparse_categorical_accuracy,");
  CHECK_THROWS_WITH(check(keras_name), Catch::Contains("'sparse_categorical_accuracy' is 'accuracy' here") &&
                                           Catch::Contains("use any of: mean_iou, dice, accuracy") &&
                                           !Catch::Contains("precision"));
  std::string softmax_inside = testing::tiny_classes_config(3);
  softmax_inside.replace(softmax_inside.find("padding: same, activation: relu}"), 32,
                         "padding: same, activation: softmax}");
  CHECK_THROWS_WITH(check(softmax_inside), Catch::Contains("classes.yaml:") && Catch::Contains("layer 'c1'") &&
                                               Catch::Contains("last layer only"));
}

TEST_CASE("N CPU towers reach one tower's weights with a softmax loss, and the metrics add up",
          "[towers][categorical][multitower]") {
  const Config config = parse_config(testing::tiny_classes_config(3), "classes.yaml");
  const Dataset data = testing::tiny_class_data();
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}, {3, 9}};
  std::vector<std::vector<float>> weights;
  std::vector<BatchStats> evals;
  for (int towers : {1, 2, 3}) {
    Trainer t(config, towers, 1);
    REQUIRE(t.classes() == 3);
    double first = 0, last = 0;
    for (int epoch = 0; epoch < 4; ++epoch)
      for (const auto& b : batches) {
        const BatchStats s = t.train_step(data, b);
        REQUIRE(s.counts.classes() == 3);
        if (epoch == 0 && &b == &batches[0]) first = s.loss();
        last = s.loss();
      }
    CHECK(last < first);
    for (int r = 1; r < towers; ++r) REQUIRE(t.params(r) == t.params(0));
    weights.push_back(t.params(0));
    evals.push_back(t.evaluate(data, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 4));
    const Tensor p = t.predict(data.images, 4);
    REQUIRE(p.shape().c == 3);
    for (size_t px = 0; px < p.numel() / 3; px += 17)
      REQUIRE(p.data()[3 * px] + p.data()[3 * px + 1] + p.data()[3 * px + 2] == Approx(1.0).epsilon(1e-5));
  }
  for (size_t k = 1; k < weights.size(); ++k) {
    double worst = 0;
    for (size_t i = 0; i < weights[0].size(); ++i)
      worst = std::max(worst, std::abs(double(weights[k][i]) - weights[0][i]) / std::max(1.0, std::abs(double(weights[0][i]))));
    CHECK(worst < 2e-5);
    CHECK(evals[k].loss() == Approx(evals[0].loss()).epsilon(1e-5));
    double total = 0;
    for (int i = 0; i < 9; ++i) total += evals[k].counts.v[MetricCounts::kSize + size_t(i)];
    CHECK(total == 13.0 * 16 * 16);  // every pixel counted once, over the towers
  }
}

TEST_CASE("the pixel stats of K-class probabilities (TTA's path) are those of the logits", "[tta][categorical]") {
  const Config config = parse_config(testing::tiny_classes_config(3), "classes.yaml");
  const Dataset data = testing::tiny_class_data();
  Trainer t(config, 1, 1);
  for (const std::vector<int>& b : {std::vector<int>{0, 1, 2, 3, 4}, std::vector<int>{5, 6, 7, 8, 9}})
    t.train_step(data, b);
  std::vector<int> all(size_t(data.size()));
  for (int i = 0; i < data.size(); ++i) all[size_t(i)] = i;
  const BatchStats want = t.evaluate(data, all, 4);
  // softmax(log p) = p: the loss and the argmax of the probabilities are the logits'.
  const BatchStats got = probability_stats(t, t.predict(data.images, 4), data.masks);
  CHECK(got.samples == want.samples);
  CHECK(got.loss() == Approx(want.loss()).epsilon(1e-5));
  CHECK(got.counts.classes() == 3);
  CHECK(got.counts.v == want.counts.v);
  // The mean over the 8 symmetries is still a distribution over the classes at every pixel.
  const Tensor p = predict_tta(t, data.images, 4);
  const Shape in = data.images.shape();
  REQUIRE(p.shape() == Shape{in.n, in.h, in.w, 3});
  for (size_t px = 0; px < p.numel() / 3; ++px)
    REQUIRE(p.data()[3 * px] + p.data()[3 * px + 1] + p.data()[3 * px + 2] == Approx(1.0).epsilon(1e-5));
}
