// Losses: values against direct hand formulas, stability at huge logits, the
// per-sample sum contract, and finite-difference checks of every gradient.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>

#include "core/error.h"
#include "layer_testing.h"
#include "train/loss.h"

using namespace trainer;

namespace {

Tensor make(Shape s, std::initializer_list<float> v) {
  Tensor t(s);
  size_t i = 0;
  for (float x : v) t.data()[i++] = x;
  return t;
}

Tensor random_mask(Shape s, unsigned seed) {
  Tensor t = testing::random_tensor(s, seed, 0.f, 1.f);
  for (size_t i = 0; i < t.numel(); ++i) t.data()[i] = t.data()[i] > 0.5f ? 1.f : 0.f;
  return t;
}

double sig(double z) { return 1 / (1 + std::exp(-z)); }

// Textbook BCE -(y log p + (1-y) log(1-p)), fine for moderate z.
double naive_bce(double z, double y) { return -(y * std::log(sig(z)) + (1 - y) * std::log(1 - sig(z))); }

}  // namespace

TEST_CASE("loss_name gives each loss the name the config and the logs use", "[loss]") {
  CHECK(std::string(loss_name(LossKind::BinaryCrossentropy)) == "binary_crossentropy");
  CHECK(std::string(loss_name(LossKind::Dice)) == "dice");
  CHECK(std::string(loss_name(LossKind::BceDice)) == "bce_dice");
  CHECK(std::string(loss_name(LossKind::KerasDice)) == "Dice");
  CHECK(keras_loss_class(LossKind::KerasDice) == "Dice");
  CHECK(keras_loss_class(LossKind::BceDice) == "bce_dice");  // no Keras class
}

TEST_CASE("loss values match hand formulas, summed over samples", "[loss]") {
  // Two samples of 2x2 pixels.
  const std::vector<float> z = {0.f, 2.f, -3.f, 0.5f, 1.f, -1.f, 4.f, -0.25f};
  const std::vector<float> y = {1.f, 0.f, 0.f, 1.f, 1.f, 1.f, 0.f, 0.f};
  Tensor logits(Shape{2, 2, 2, 1}), targets(Shape{2, 2, 2, 1});
  for (size_t i = 0; i < z.size(); ++i) logits.data()[i] = z[i], targets.data()[i] = y[i];

  double bce = 0, dice = 0;
  for (int s = 0; s < 2; ++s) {
    double b = 0, py = 0, p = 0, sy = 0;
    for (int i = 0; i < 4; ++i) {
      const double zi = z[s * 4 + i], yi = y[s * 4 + i];
      b += naive_bce(zi, yi);
      py += sig(zi) * yi;
      p += sig(zi);
      sy += yi;
    }
    bce += b / 4;
    dice += 1 - (2 * py + 1) / (p + sy + 1);
  }
  CHECK(loss_sum(LossKind::BinaryCrossentropy, logits, targets, nullptr) == Approx(bce).epsilon(1e-6));
  CHECK(loss_sum(LossKind::Dice, logits, targets, nullptr) == Approx(dice).epsilon(1e-6));
  CHECK(loss_sum(LossKind::BceDice, logits, targets, nullptr) == Approx(bce + dice).epsilon(1e-6));
}

TEST_CASE("BCE of z=0 is log 2, and dice of an empty prediction of an empty mask is 0", "[loss]") {
  Tensor z = make(Shape{1, 1, 2, 1}, {0.f, 0.f});
  Tensor y = make(Shape{1, 1, 2, 1}, {1.f, 0.f});
  CHECK(loss_sum(LossKind::BinaryCrossentropy, z, y, nullptr) == Approx(std::log(2.0)));
  Tensor neg = make(Shape{1, 1, 2, 1}, {-100.f, -100.f});
  Tensor empty = make(Shape{1, 1, 2, 1}, {0.f, 0.f});
  CHECK(loss_sum(LossKind::Dice, neg, empty, nullptr) == Approx(0.0).margin(1e-12));
}

TEST_CASE("huge logits give finite losses and gradients", "[loss]") {
  // Confidently wrong at +-100: BCE = 100 per pixel; confidently right: ~0.
  Tensor z = make(Shape{1, 1, 4, 1}, {100.f, -100.f, 100.f, -100.f});
  Tensor y = make(Shape{1, 1, 4, 1}, {0.f, 1.f, 1.f, 0.f});
  for (LossKind k : {LossKind::BinaryCrossentropy, LossKind::Dice, LossKind::BceDice}) {
    Tensor g;
    const double l = loss_sum(k, z, y, &g);
    REQUIRE(std::isfinite(l));
    for (size_t i = 0; i < g.numel(); ++i) REQUIRE(std::isfinite(g.data()[i]));
  }
  Tensor g;
  CHECK(loss_sum(LossKind::BinaryCrossentropy, z, y, &g) == Approx(50.0).epsilon(1e-6));
  CHECK(g.data()[0] == Approx(0.25f));   // (p - y) / m = (1 - 0) / 4
  CHECK(g.data()[1] == Approx(-0.25f));
  CHECK(g.data()[2] == Approx(0.f).margin(1e-12));
}

TEST_CASE("loss gradients match central finite differences", "[loss]") {
  const Shape s{2, 3, 4, 1};
  for (LossKind k : {LossKind::BinaryCrossentropy, LossKind::Dice, LossKind::BceDice}) {
    Tensor z = testing::random_tensor(s, 11, -3.f, 3.f);
    Tensor y = random_mask(s, 12);
    Tensor g;
    loss_sum(k, z, y, &g);
    REQUIRE(g.shape() == s);
    INFO("loss kind " << int(k));
    CHECK(testing::loss_gradient_gap(k, CrossEntropyForm{}, z, y) < 2e-3);
  }
}

TEST_CASE("loss rejects mismatched shapes", "[loss]") {
  Tensor a(Shape{1, 2, 2, 1}), b(Shape{1, 2, 3, 1});
  a.zero();
  b.zero();
  CHECK_THROWS_AS(loss_sum(LossKind::Dice, a, b, nullptr), InternalError);
}
