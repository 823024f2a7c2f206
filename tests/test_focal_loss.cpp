// The focal losses (BinaryFocalCrossentropy, CategoricalFocalCrossentropy)
// and label smoothing: the config's forms, the values Keras's docstrings give,
// the per-pixel math against Keras's formulas written independently here (on
// probabilities, in double), every gradient against central finite
// differences, saturated logits, and training on 1 and 2 towers.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
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

LossConfig parse_loss(const std::string& loss) {
  const std::string yaml = R"(
model:
  layers:
    - {type: Input, shape: [8, 8, 3]}
    - {type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data: {images: unused, masks: unused}
training:
  loss: )" + loss + "\n";
  return parse_config(yaml, "focal.yaml").training.loss;
}

std::string loss_error(const std::string& loss) {
  try {
    parse_loss(loss);
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

double sig(double z) { return 1 / (1 + std::exp(-z)); }

/// Keras 3's binary_focal_crossentropy of one probability p against y, as
/// keras/src/losses/losses.py writes it (p away from 0 and 1: no clipping).
double keras_binary_focal(double p, double y, double gamma, bool balanced, double alpha, double smoothing) {
  const double t = y * (1 - smoothing) + 0.5 * smoothing;
  const double bce = -(t * std::log(p) + (1 - t) * std::log(1 - p));
  const double p_t = t * p + (1 - t) * (1 - p);
  double l = std::pow(1 - p_t, gamma) * bce;
  if (balanced) l *= t * alpha + (1 - t) * (1 - alpha);
  return l;
}

/// Keras 3's categorical_focal_crossentropy of one pixel's probabilities p
/// against class c (gamma 0 and alpha 1: categorical_crossentropy); alphas,
/// when given, is Keras 3's list (class j's term times alphas[j]).
double keras_categorical_focal(const std::vector<double>& p, int c, double gamma, double alpha, double smoothing,
                               const std::vector<double>& alphas = {}) {
  const double k = double(p.size());
  double l = 0;
  for (size_t j = 0; j < p.size(); ++j) {
    const double t = (int(j) == c ? 1.0 : 0.0) * (1 - smoothing) + smoothing / k;
    l += (alphas.empty() ? alpha : alphas[j]) * std::pow(1 - p[j], gamma) * (-t * std::log(p[j]));
  }
  return l;
}

Tensor tensor_of(Shape s, const std::vector<float>& v) {
  Tensor t(s);
  for (size_t i = 0; i < v.size(); ++i) t.data()[i] = v[i];
  return t;
}

}  // namespace

TEST_CASE("the focal losses and label_smoothing take Keras's names, arguments and defaults", "[loss][focal]") {
  const LossConfig bf = parse_loss("binary_focal_crossentropy");
  CHECK(bf.kind == LossKind::BinaryFocalCrossentropy);
  CHECK(bf.gamma == 2.0);
  CHECK(bf.alpha == 0.25);
  CHECK_FALSE(bf.apply_class_balancing);
  CHECK(bf.label_smoothing == 0.0);
  const LossConfig m = parse_loss(
      "{type: BinaryFocalCrossentropy, gamma: 1.5, alpha: 0.4, apply_class_balancing: true, label_smoothing: 0.1, "
      "from_logits: false}");
  CHECK(m.kind == LossKind::BinaryFocalCrossentropy);
  CHECK(m.gamma == 1.5);
  CHECK(m.alpha == 0.4);
  CHECK(m.apply_class_balancing);
  CHECK(m.label_smoothing == 0.1);
  const CrossEntropyForm mf = cross_entropy_form(m);
  CHECK(mf.gamma == 1.5f);
  CHECK(mf.alpha == 0.4f);
  CHECK(mf.balanced);
  CHECK(mf.smoothing == 0.1f);
  CHECK(cross_entropy_form(bf).alpha == 1.f);  // alpha only weighs with apply_class_balancing, as in Keras
  CHECK(parse_loss("{type: BinaryCrossentropy, label_smoothing: 0.2}").label_smoothing == 0.2);
  const LossConfig cf = parse_loss("{type: CategoricalFocalCrossentropy, gamma: 3}");
  CHECK(cf.kind == LossKind::CategoricalFocalCrossentropy);
  CHECK(is_categorical(cf.kind));
  CHECK(cross_entropy_form(cf).alpha == 0.25f);  // CategoricalFocalCrossentropy's alpha always applies
  CHECK(cross_entropy_form(cf).gamma == 3.f);
  CHECK(cross_entropy_form(parse_loss("{type: CategoricalCrossentropy, label_smoothing: 0.1}")).smoothing == 0.1f);
  CHECK(cross_entropy_form(parse_loss("dice")).plain());
  CHECK(cross_entropy_form(parse_loss("sparse_categorical_crossentropy")).plain());

  // Keras 3's per-class list.
  const LossConfig listed = parse_loss("{type: CategoricalFocalCrossentropy, alpha: [0.25, 0.75, 2]}");
  CHECK(listed.alphas == std::vector<double>{0.25, 0.75, 2.0});
  CHECK_THAT(loss_error("{type: BinaryFocalCrossentropy, alpha: [0.25, 0.75]}"),
             Catch::Contains("only CategoricalFocalCrossentropy takes") && Catch::Contains("apply_class_balancing"));
  CHECK_THAT(loss_error("{type: CategoricalFocalCrossentropy, alpha: [0.25, -1]}"),
             Catch::Contains("must be a list of numbers >= 0, one per class"));
  CHECK_THAT(loss_error("{type: CategoricalFocalCrossentropy, alpha: [0.25, high]}"),
             Catch::Contains("must be a list of numbers >= 0"));
  CHECK_THAT(loss_error("{type: CategoricalFocalCrossentropy, alpha: []}"), Catch::Contains("is an empty list"));
  CHECK_THAT(loss_error("{type: BinaryFocalCrossentropy, gamma: -1}"), Catch::Contains("'gamma' must be in [0"));
  CHECK_THAT(loss_error("{type: BinaryFocalCrossentropy, alpha: 1.5}"), Catch::Contains("'alpha' must be in [0"));
  CHECK_THAT(loss_error("{type: BinaryCrossentropy, label_smoothing: 1.5}"),
             Catch::Contains("'label_smoothing' must be in [0"));
  CHECK_THAT(loss_error("{type: CategoricalFocalCrossentropy, apply_class_balancing: true}"),
             Catch::Contains("unknown key 'apply_class_balancing'"));
  // Keras's SparseCategoricalCrossentropy has no label_smoothing; neither have dice and bce_dice.
  CHECK_THAT(loss_error("{type: SparseCategoricalCrossentropy, label_smoothing: 0.1}"),
             Catch::Contains("not an argument of Keras's SparseCategoricalCrossentropy") &&
                 Catch::Contains("type: CategoricalCrossentropy"));
  CHECK_THAT(loss_error("{type: dice, label_smoothing: 0.1}"), Catch::Contains("unknown key 'label_smoothing'"));
  CHECK_THAT(loss_error("{type: BinaryFocalCrossentropy, gama: 2}"), Catch::Contains("did you mean 'gamma'"));
}

TEST_CASE("the focal losses give the values of Keras's docstring examples", "[loss][focal]") {
  // keras.losses.binary_focal_crossentropy(y_true=[[0, 1], [0, 0]],
  // y_pred=[[0.6, 0.4], [0.4, 0.6]], gamma=2) -> [0.330, 0.206].
  auto logit = [](double p) { return float(std::log(p / (1 - p))); };
  const Tensor z = tensor_of(Shape{2, 1, 2, 1}, {logit(0.6), logit(0.4), logit(0.4), logit(0.6)});
  const Tensor y = tensor_of(Shape{2, 1, 2, 1}, {0, 1, 0, 0});
  CrossEntropyForm f;
  f.gamma = 2.f;
  const Tensor first = tensor_of(Shape{1, 1, 2, 1}, {z.data()[0], z.data()[1]});
  const Tensor first_y = tensor_of(Shape{1, 1, 2, 1}, {0, 1});
  CHECK(loss_sum(LossKind::BinaryFocalCrossentropy, first, first_y, nullptr, std::nullopt, f) ==
        Approx(0.330).margin(5e-4));
  CHECK(loss_sum(LossKind::BinaryFocalCrossentropy, z, y, nullptr, std::nullopt, f) ==
        Approx(0.330 + 0.206).margin(1e-3));

  // keras.losses.categorical_focal_crossentropy(y_true=[[0, 1, 0], [0, 0, 1]],
  // y_pred=[[0.05, 0.9, 0.05], [0.1, 0.85, 0.05]]) -> [2.63401289e-04, 6.75912094e-01]
  // (alpha 0.25, gamma 2). Logits log(p): their softmax is p.
  const Tensor zc = tensor_of(Shape{1, 1, 2, 3}, {std::log(0.05f), std::log(0.9f), std::log(0.05f), std::log(0.1f),
                                                  std::log(0.85f), std::log(0.05f)});
  const Tensor yc = tensor_of(Shape{1, 1, 2, 1}, {1, 2});
  CrossEntropyForm c;
  c.gamma = 2.f;
  c.alpha = 0.25f;
  // loss_sum of a categorical loss is per pixel times 1 / (H W) per sample: here the mean of the two pixels.
  CHECK(loss_sum(LossKind::CategoricalFocalCrossentropy, zc, yc, nullptr, std::nullopt, c) ==
        Approx((2.63401289e-04 + 6.75912094e-01) / 2).epsilon(1e-5));
}

TEST_CASE("the focal and smoothed cross-entropies match Keras's formulas on probabilities", "[loss][focal]") {
  struct Case {
    float gamma, alpha;
    bool balanced;
    float smoothing;
  };
  const Case cases[] = {{2, 1, false, 0}, {0, 1, false, 0.1f}, {2, 0.25f, true, 0}, {0.5f, 0.7f, true, 0.2f},
                        {1, 0.25f, false, 0.05f}};
  const std::vector<float> zs = {-6.f, -2.5f, -0.3f, 0.f, 0.4f, 1.7f, 5.f};
  for (const Case& k : cases) {
    CrossEntropyForm f;
    f.gamma = k.gamma, f.alpha = k.alpha, f.balanced = k.balanced, f.smoothing = k.smoothing;
    INFO("gamma " << k.gamma << ", alpha " << k.alpha << ", balanced " << k.balanced << ", smoothing "
                  << k.smoothing);
    for (float z : zs)
      for (float y : {0.f, 1.f}) {
        INFO("z " << z << ", y " << y);
        CHECK(sigmoid_focal_loss(z, y, f) ==
              Approx(keras_binary_focal(sig(z), y, k.gamma, k.balanced, k.alpha, k.smoothing)).epsilon(2e-5));
      }
  }
  // Categorical, 4 classes: Keras's alpha multiplies every class's term.
  const std::vector<float> z = {0.3f, -1.2f, 2.f, 0.5f};
  std::vector<double> p(4);
  double s = 0;
  for (float v : z) s += std::exp(double(v));
  for (size_t j = 0; j < 4; ++j) p[j] = std::exp(double(z[j])) / s;
  for (const Case& k : cases) {
    CrossEntropyForm f;
    f.gamma = k.gamma, f.alpha = k.alpha, f.smoothing = k.smoothing;
    for (int c = 0; c < 4; ++c) {
      INFO("gamma " << k.gamma << ", alpha " << k.alpha << ", smoothing " << k.smoothing << ", class " << c);
      CHECK(softmax_loss_term(z.data(), 4, c, f) ==
            Approx(keras_categorical_focal(p, c, k.gamma, k.alpha, k.smoothing)).epsilon(2e-5));
    }
    CHECK(softmax_loss_term(z.data(), 4, -1, f) == 0.f);  // an ignored pixel
    const std::vector<float> alphas = {0.2f, 1.f, 0.5f, 3.f};  // Keras 3's list: each class's term its own factor
    f.alphas = alphas.data();
    for (int c = 0; c < 4; ++c) {
      INFO("gamma " << k.gamma << ", per-class alphas, smoothing " << k.smoothing << ", class " << c);
      CHECK(softmax_loss_term(z.data(), 4, c, f) ==
            Approx(keras_categorical_focal(p, c, k.gamma, 0, k.smoothing, {0.2, 1.0, 0.5, 3.0})).epsilon(2e-5));
    }
  }
  // The plain form is the plain cross-entropy.
  CHECK(softmax_loss_term(z.data(), 4, 2, CrossEntropyForm{}) == softmax_cross_entropy(z.data(), 4, 2));
}

TEST_CASE("the focal and smoothed losses' gradients match central finite differences", "[loss][focal]") {
  const Shape binary{2, 3, 4, 1};
  const Tensor z = random_tensor(binary, 21, -3.f, 3.f);
  Tensor y = random_tensor(binary, 22, 0.f, 1.f);
  for (size_t i = 0; i < y.numel(); ++i) y.data()[i] = y.data()[i] > 0.5f ? 1.f : 0.f;
  const std::vector<CrossEntropyForm> forms = {
      {2.f, 1.f, false, 0.f}, {2.f, 0.25f, true, 0.f}, {0.5f, 0.6f, true, 0.15f}, {0.f, 1.f, false, 0.1f}};
  for (const CrossEntropyForm& f : forms) {
    INFO("gamma " << f.gamma << ", alpha " << f.alpha << ", balanced " << f.balanced << ", smoothing "
                  << f.smoothing);
    CHECK(loss_gradient_gap(LossKind::BinaryFocalCrossentropy, f, z, y) < 2e-3);
  }
  // binary_crossentropy with label smoothing takes the same path.
  CrossEntropyForm smooth;
  smooth.smoothing = 0.2f;
  CHECK(loss_gradient_gap(LossKind::BinaryCrossentropy, smooth, z, y) < 2e-3);

  const Shape logits{2, 2, 3, 4};
  const Tensor zc = random_tensor(logits, 23, -3.f, 3.f);
  Tensor yc(Shape{2, 2, 3, 1});
  for (size_t i = 0; i < yc.numel(); ++i) yc.data()[i] = float(i % 4);
  yc.data()[5] = -1.f;  // an ignored pixel: no gradient
  const std::vector<CrossEntropyForm> categorical = {
      {2.f, 0.25f, false, 0.f}, {0.5f, 1.f, false, 0.1f}, {0.f, 1.f, false, 0.3f}, {3.f, 0.5f, false, 0.05f}};
  const std::vector<float> alphas = {0.2f, 1.f, 0.5f, 3.f};
  for (const bool per_class : {false, true})
    for (CrossEntropyForm f : categorical) {
      if (per_class) f.alphas = alphas.data();
      INFO("categorical: gamma " << f.gamma << ", alpha " << f.alpha << (per_class ? " (per class)" : "")
                                 << ", smoothing " << f.smoothing);
      CHECK(loss_gradient_gap(LossKind::CategoricalFocalCrossentropy, f, zc, yc) < 2e-3);
      Tensor g;
      loss_sum(LossKind::CategoricalFocalCrossentropy, zc, yc, &g, std::nullopt, f);
      for (int j = 0; j < 4; ++j) CHECK(g.data()[5 * 4 + j] == 0.f);
    }
}

TEST_CASE("the focal losses stay finite at saturated logits", "[loss][focal]") {
  // Right at +-100 (1 - p_t = 0 in float), wrong at +-100, and smoothed targets.
  const Tensor z = tensor_of(Shape{1, 1, 4, 1}, {100.f, -100.f, 100.f, -100.f});
  const Tensor y = tensor_of(Shape{1, 1, 4, 1}, {1.f, 0.f, 0.f, 1.f});
  for (const CrossEntropyForm& f : {CrossEntropyForm{2.f, 1.f, false, 0.f}, CrossEntropyForm{0.5f, 0.25f, true, 0.f},
                                    CrossEntropyForm{2.f, 1.f, false, 0.1f}}) {
    Tensor g;
    const double l = loss_sum(LossKind::BinaryFocalCrossentropy, z, y, &g, std::nullopt, f);
    CHECK(std::isfinite(l));
    for (size_t i = 0; i < 4; ++i) CHECK(std::isfinite(g.data()[i]));
    if (f.smoothing == 0.f) {
      CHECK(g.data()[0] == 0.f);  // right: no loss, no gradient
      CHECK(std::abs(g.data()[2]) > 0.01f);  // wrong: a full gradient
    }
  }
  const Tensor zc = tensor_of(Shape{1, 1, 1, 3}, {100.f, -100.f, 0.f});
  for (int c : {0, 1}) {
    const Tensor yc = tensor_of(Shape{1, 1, 1, 1}, {float(c)});
    for (const CrossEntropyForm& f : {CrossEntropyForm{2.f, 0.25f, false, 0.f}, CrossEntropyForm{0.5f, 1.f, false, 0.1f}}) {
      Tensor g;
      CHECK(std::isfinite(loss_sum(LossKind::CategoricalFocalCrossentropy, zc, yc, &g, std::nullopt, f)));
      for (int j = 0; j < 3; ++j) CHECK(std::isfinite(g.data()[j]));
    }
  }
}

TEST_CASE("a focal loss trains on 1 and 2 towers to the same weights", "[loss][focal][towers][multitower]") {
  const Dataset binary = tiny_data(), classes = tiny_class_data();
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}};
  const std::pair<std::string, const Dataset*> runs[] = {
      {tiny_config(true), &binary},
      {tiny_classes_config(3, "categorical_focal_crossentropy"), &classes},
      {tiny_classes_config(3, "{type: CategoricalFocalCrossentropy, alpha: [0.5, 1, 2], label_smoothing: 0.1}"),
       &classes}};
  for (const auto& [base, data] : runs) {
    std::string yaml = base;
    const std::string binary_loss = "loss: bce_dice";
    if (yaml.find(binary_loss) != std::string::npos)
      yaml.replace(yaml.find(binary_loss), binary_loss.size(),
                   "loss: {type: BinaryFocalCrossentropy, gamma: 2, apply_class_balancing: true, label_smoothing: 0.1}");
    const Config config = parse_config(yaml, "focal.yaml");
    INFO("loss " << loss_name(config.training.loss.kind));
    REQUIRE(is_focal(config.training.loss.kind));
    Trainer one(config, 1, 1), two(config, 2, 1);
    std::vector<double> losses;
    for (const std::vector<int>& b : batches) {
      const double a = one.train_step(*data, b).loss(), c = two.train_step(*data, b).loss();
      CHECK(std::isfinite(a));
      CHECK(c == Approx(a).epsilon(1e-5));
      losses.push_back(a);
    }
    const std::vector<float> w1 = one.params(0), w2 = two.params(0);
    double worst = 0;
    for (size_t i = 0; i < w1.size(); ++i) worst = std::max(worst, std::abs(double(w1[i]) - w2[i]));
    CHECK(worst < 1e-5);
    CHECK(two.params(1) == w2);
  }
}

TEST_CASE("training and evaluate compute the configured focal form: Keras's formula on predict's probabilities",
          "[loss][focal]") {
  // A network without BatchNormalization or Dropout, so that the first
  // training step's loss is that of predict's outputs at the same weights.
  auto config_of = [](int filters, const std::string& activation, const std::string& loss,
                      const std::string& extra) {
    return R"(
model:
  layers:
    - {name: in, type: Input, shape: [16, 16, 3]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: relu}
    - {name: out, type: Conv2D, filters: )" +
           std::to_string(filters) + ", kernel_size: 1, activation: " + activation + R"(}
data: {images: unused, masks: unused}
training:
  batch_size: 13
  seed: 3
  loss: )" + loss + "\n" + extra +
           "  optimizer: {type: SGD, learning_rate: 0.1}\n";
  };
  std::vector<int> all(13);
  for (int i = 0; i < 13; ++i) all[size_t(i)] = i;

  SECTION("binary") {
    const Dataset data = tiny_data();
    const struct {
      std::string loss;
      double gamma, alpha, smoothing;
      bool balanced;
    } cases[] = {
        {"{type: BinaryFocalCrossentropy, gamma: 1.5, alpha: 0.3, apply_class_balancing: true, label_smoothing: 0.1}",
         1.5, 0.3, 0.1, true},
        {"{type: BinaryCrossentropy, label_smoothing: 0.2}", 0, 1, 0.2, false},
        {"binary_focal_crossentropy", 2, 0.25, 0, false}};
    for (const auto& k : cases) {
      INFO(k.loss);
      Trainer t(parse_config(config_of(1, "sigmoid", k.loss, ""), "focal.yaml"), 1, 1);
      const Tensor p = t.predict(data.images, 13);
      double want = 0;
      for (size_t i = 0; i < p.numel(); ++i)
        want += keras_binary_focal(p.data()[i], data.masks.data()[i], k.gamma, k.balanced, k.alpha, k.smoothing);
      want /= double(p.numel());
      CHECK(t.evaluate(data, all, 5).loss() == Approx(want).epsilon(1e-5));
      CHECK(t.train_step(data, all).loss() == Approx(want).epsilon(1e-5));
    }
  }
  SECTION("categorical, with class weights in training only") {
    const Dataset data = tiny_class_data();
    const std::vector<double> w = {1.0, 4.0, 0.5};
    Trainer t(parse_config(config_of(3, "softmax",
                                     "{type: CategoricalFocalCrossentropy, gamma: 2, alpha: 0.4, label_smoothing: 0.1}",
                                     "  class_weight: [1.0, 4.0, 0.5]\n"),
                           "focal.yaml"),
              1, 1);
    const Tensor p = t.predict(data.images, 13);
    double plain = 0, weighted = 0;
    const size_t pixels = data.masks.numel();
    for (size_t i = 0; i < pixels; ++i) {
      const std::vector<double> pi(p.data() + 3 * i, p.data() + 3 * i + 3);
      const int c = int(data.masks.data()[i]);
      const double l = keras_categorical_focal(pi, c, 2, 0.4, 0.1);
      plain += l;
      weighted += w[size_t(c)] * l;
    }
    CHECK(t.evaluate(data, all, 5).loss() == Approx(plain / double(pixels)).epsilon(1e-5));
    CHECK(t.train_step(data, all).loss() == Approx(weighted / double(pixels)).epsilon(1e-5));
  }
  SECTION("categorical, with Keras 3's per-class alphas in training and evaluate") {
    const Dataset data = tiny_class_data();
    const std::vector<double> alphas = {0.3, 1.0, 2.0};
    const std::string loss =
        "{type: CategoricalFocalCrossentropy, gamma: 2, alpha: [0.3, 1.0, 2.0], label_smoothing: 0.1}";
    Trainer t(parse_config(config_of(3, "softmax", loss, ""), "focal.yaml"), 1, 1);
    const Tensor p = t.predict(data.images, 13);
    double want = 0;
    const size_t pixels = data.masks.numel();
    for (size_t i = 0; i < pixels; ++i) {
      const std::vector<double> pi(p.data() + 3 * i, p.data() + 3 * i + 3);
      want += keras_categorical_focal(pi, int(data.masks.data()[i]), 2, 0, 0.1, alphas);
    }
    CHECK(t.evaluate(data, all, 5).loss() == Approx(want / double(pixels)).epsilon(1e-5));
    CHECK(t.train_step(data, all).loss() == Approx(want / double(pixels)).epsilon(1e-5));
    // One value per class: a list of another length names the loss and the class count.
    const std::string two = "{type: CategoricalFocalCrossentropy, alpha: [0.3, 1.0]}";
    CHECK_THROWS_WITH(Trainer(parse_config(config_of(3, "softmax", two, ""), "focal.yaml"), 1, 1),
                      Catch::Contains("focal.yaml:") &&
                          Catch::Contains("alpha lists 2 values for a model of 3 classes (its last layer's filters); "
                                          "give one per class"));
  }
}
