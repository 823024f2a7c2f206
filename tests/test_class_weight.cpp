// training.class_weight: the config's forms, the losses it applies to, the
// weighted per-pixel loss against a hand computation, its gradient against
// central finite differences, and training: weights of 2 double the loss and
// the first step, 1 and 2 towers agree, and validation stays unweighted.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "layer_testing.h"
#include "tiny_model.h"
#include "train/loss.h"
#include "train/trainer.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// tiny_classes_config(3) (sparse categorical, SGD nesterov) with `extra`
/// lines added to its training section.
std::string classes_config(const std::string& extra, const std::string& loss = "sparse_categorical_crossentropy") {
  std::string yaml = tiny_classes_config(3, loss);
  const std::string key = "training:\n";
  REQUIRE(yaml.find(key) != std::string::npos);
  yaml.insert(yaml.find(key) + key.size(), extra);
  return yaml;
}

std::vector<double> weights_of(const std::string& value) {
  return parse_config(classes_config("  class_weight: " + value + "\n"), "cw.yaml").training.class_weight;
}

std::string config_error(const std::string& value) {
  try {
    weights_of(value);
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

std::string trainer_error(const std::string& yaml) {
  try {
    Trainer t(parse_config(yaml, "cw.yaml"), 1, 1);
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

double sig(double z) { return 1 / (1 + std::exp(-z)); }

}  // namespace

TEST_CASE("class_weight takes Keras's mapping or a list, 1 for classes left out", "[class_weight]") {
  CHECK(weights_of("{0: 1.0, 1: 5}") == std::vector<double>{1.0, 5.0});
  CHECK(weights_of("{2: 3}") == std::vector<double>{1.0, 1.0, 3.0});
  CHECK(weights_of("[0.5, 2, 0]") == std::vector<double>{0.5, 2.0, 0.0});
  CHECK(parse_config(classes_config(""), "cw.yaml").training.class_weight.empty());
  CHECK_THAT(config_error("{0: -1}"), Catch::Contains("training.class_weight: class 0 must be a number >= 0"));
  CHECK_THAT(config_error("[1, heavy]"), Catch::Contains("entry 1 must be a number >= 0"));
  CHECK_THAT(config_error("{background: 1}"),
             Catch::Contains("key 'background' is not a class index") && Catch::Contains("{0: 1.0, 1: 5.0}"));
  CHECK_THAT(config_error("[]"), Catch::Contains("is empty"));
  CHECK_THAT(config_error("balanced"), Catch::Contains("is not a class weight table"));
  CHECK_THAT(config_error("{1: 5, 01: 2}"), Catch::Contains("class 1 is given twice (key '01')"));  // one would win
  CHECK(config_error("{0: 1}") == "accepted");
  CHECK_THAT(trainer_error(classes_config("  class_weight: {3: 2}\n")),
             Catch::Contains("gives weights to class 3, but the model has 3 classes (0..2)"));
  CHECK_THAT(trainer_error(classes_config("  class_weight: [1, 1, 1, 2, 2]\n")),
             Catch::Contains("gives weights to classes 3..4"));
  CHECK_THAT(trainer_error(classes_config("  class_weight: {255: 0}\n",
                                          "{type: SparseCategoricalCrossentropy, ignore_class: 255}")),
             Catch::Contains("are left out of the loss already"));
  std::string binary = tiny_config(true);  // bce_dice
  const std::string loss = "loss: bce_dice";
  binary.replace(binary.find(loss), loss.size(), "loss: bce_dice\n  class_weight: {1: 4}");
  CHECK_THAT(trainer_error(binary), Catch::Contains("is a ratio of sums over the pixels") && Catch::Contains("binary_crossentropy"));
  binary.replace(binary.find("loss: bce_dice"), 14, "loss: binary_crossentropy");
  CHECK(trainer_error(binary) == "accepted");
  binary.replace(binary.find("{1: 4}"), 6, "{2: 4}");
  CHECK_THAT(trainer_error(binary), Catch::Contains("binary masks have classes 0 (background) and 1"));
  CHECK_THAT(trainer_error(classes_config("  class_wieght: [1, 2]\n")), Catch::Contains("did you mean 'class_weight'"));
}

TEST_CASE("class weights multiply each pixel's cross-entropy by its class's weight", "[class_weight][loss]") {
  // Binary: 2 samples of 3 pixels; weights 0.5 (background) and 4 (foreground).
  const std::vector<float> w2 = {0.5f, 4.f};
  CrossEntropyForm f;
  f.class_weights = w2.data();
  Tensor z(Shape{2, 1, 3, 1}), y(Shape{2, 1, 3, 1});
  const float zs[6] = {0.3f, -1.f, 2.f, -0.5f, 1.5f, 0.f}, ys[6] = {1, 0, 1, 0, 0, 1};
  double want = 0;
  for (int i = 0; i < 6; ++i) {
    z.data()[i] = zs[i], y.data()[i] = ys[i];
    const double p = sig(zs[i]);
    want += w2[size_t(ys[i])] * -(ys[i] * std::log(p) + (1 - ys[i]) * std::log(1 - p)) / 3;
  }
  CHECK(loss_sum(LossKind::BinaryCrossentropy, z, y, nullptr, std::nullopt, f) == Approx(want).epsilon(1e-6));

  // Categorical: one sample of 4 pixels, 3 classes, one pixel ignored.
  const std::vector<float> w3 = {1.f, 3.f, 0.25f};
  CrossEntropyForm c;
  c.class_weights = w3.data();
  const Tensor zc = random_tensor(Shape{1, 2, 2, 3}, 31, -2.f, 2.f);
  Tensor yc(Shape{1, 2, 2, 1});
  const float cls[4] = {0, 1, 2, -1};
  for (int i = 0; i < 4; ++i) yc.data()[i] = cls[i];
  double cwant = 0;
  for (int i = 0; i < 3; ++i) {
    const float* zi = zc.data() + 3 * i;
    double s = 0;
    for (int j = 0; j < 3; ++j) s += std::exp(double(zi[j]));
    cwant += w3[size_t(cls[i])] * -(double(zi[int(cls[i])]) - std::log(s)) / 4;
  }
  CHECK(loss_sum(LossKind::SparseCategoricalCrossentropy, zc, yc, nullptr, std::nullopt, c) ==
        Approx(cwant).epsilon(1e-6));

  // The gradients against central differences, with focal terms too.
  for (float gamma : {0.f, 2.f}) {
    c.gamma = gamma;
    f.gamma = gamma;
    for (const auto& [kind, logits, targets, form] :
         {std::make_tuple(LossKind::BinaryFocalCrossentropy, z, y, f),
          std::make_tuple(LossKind::CategoricalFocalCrossentropy, zc, yc, c)}) {
      INFO("kind " << int(kind) << ", gamma " << gamma);
      CHECK(loss_gradient_gap(kind, form, logits, targets) < 2e-3);
    }
  }
}

TEST_CASE("class weights weigh the training loss and step, on any number of towers, and not val_loss",
          "[class_weight][towers][multitower]") {
  const Dataset data = tiny_class_data();
  const std::vector<int> batch = {0, 1, 2, 3, 4}, held_out = {5, 6, 7, 8, 9, 10, 11, 12};
  const Config plain = parse_config(classes_config(""), "cw.yaml");
  const Config doubled = parse_config(classes_config("  class_weight: [2, 2, 2]\n"), "cw.yaml");
  Trainer a(plain, 1, 1), b(doubled, 1, 1);
  const std::vector<float> w0 = a.params(0);
  REQUIRE(w0 == b.params(0));
  // The same weights evaluate the same: validation is unweighted.
  CHECK(b.evaluate(data, held_out, 4).loss() == Approx(a.evaluate(data, held_out, 4).loss()).epsilon(1e-12));
  const double la = a.train_step(data, batch).loss(), lb = b.train_step(data, batch).loss();
  CHECK(lb == Approx(2 * la).epsilon(1e-6));
  // The first SGD step is linear in the gradient: twice the move.
  const std::vector<float> wa = a.params(0), wb = b.params(0);
  double worst = 0, moved = 0;
  for (size_t i = 0; i < w0.size(); ++i) {
    worst = std::max(worst, std::abs(2 * (double(wa[i]) - w0[i]) - (double(wb[i]) - w0[i])));
    moved = std::max(moved, std::abs(double(wa[i]) - w0[i]));
  }
  REQUIRE(moved > 1e-3);
  CHECK(worst < 1e-5);

  // Uneven weights: 1, 2 and 3 towers take the same step.
  const Config uneven = parse_config(classes_config("  class_weight: {1: 3, 2: 0.5}\n"), "cw.yaml");
  Trainer one(uneven, 1, 1);
  one.train_step(data, batch);
  const std::vector<float> w1 = one.params(0);
  REQUIRE(w1 != wa);
  for (int towers : {2, 3}) {
    Trainer n(uneven, towers, 1);
    n.train_step(data, batch);
    const std::vector<float> wn = n.params(0);
    double gap = 0;
    for (size_t i = 0; i < w1.size(); ++i) gap = std::max(gap, std::abs(double(wn[i]) - w1[i]));
    INFO(towers << " towers");
    CHECK(gap < 1e-5);
  }
}
