// Test-time augmentation: inverse_symmetry undoes each of the 8 symmetries,
// and predict_tta's average over them is equivariant: predicting a turned
// image gives the turned prediction (which a plain prediction of a model with
// 3x3 kernels is not), and on a non-square input the 4 flips are used.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "config/config.h"
#include "data/augmentation.h"
#include "tiny_model.h"
#include "train/trainer.h"
#include "train/tta.h"

using namespace trainer;

namespace {

/// max |a - b| over two tensors of one shape.
double max_diff(const Tensor& a, const Tensor& b) {
  double d = 0;
  for (size_t i = 0; i < a.numel(); ++i) d = std::max(d, double(std::abs(a.data()[i] - b.data()[i])));
  return d;
}

/// Every sample of x [N, H, W, C] transformed by s.
Tensor transformed(const Tensor& x, Symmetry s) {
  const Shape sh = x.shape();
  Tensor out(sh);
  for (int i = 0; i < sh.n; ++i) apply_symmetry(s, x.sample(i), out.sample(i), sh.h, sh.w, sh.c);
  return out;
}

}  // namespace

TEST_CASE("inverse_symmetry undoes every symmetry of the square", "[tta]") {
  Tensor x(Shape{1, 3, 3, 2});
  for (size_t i = 0; i < x.numel(); ++i) x.data()[i] = float(i);
  for (Symmetry s = 0; s < 8; ++s) {
    INFO("symmetry " << s);
    const Tensor back = transformed(transformed(x, s), inverse_symmetry(s));
    CHECK(max_diff(back, x) == 0.0);
    if (s != 0) CHECK(max_diff(transformed(x, s), x) > 0);  // a real transform
  }
}

TEST_CASE("predict_tta averages over the symmetries and is equivariant under them", "[tta]") {
  const Config config = parse_config(testing::tiny_config(false), "tiny.yaml");
  Trainer trainer(config, 2, 1);
  const Dataset data = testing::tiny_data();
  Tensor images(Shape{3, data.images.shape().h, data.images.shape().w, data.images.shape().c});
  std::copy(data.images.data(), data.images.data() + images.numel(), images.data());
  const Tensor tta = predict_tta(trainer, images, 2);
  const Tensor plain = trainer.predict(images, 2);
  REQUIRE(tta.shape().nhwc() == plain.shape().nhwc());
  CHECK(max_diff(tta, plain) > 1e-4);  // the model is not symmetric itself: TTA changes the output
  for (Symmetry s : {1u, 2u, 4u, 5u, 7u}) {
    INFO("symmetry " << s);
    const Tensor of_turned = predict_tta(trainer, transformed(images, s), 2);
    CHECK(max_diff(of_turned, transformed(tta, s)) < 1e-5);  // the same 8 terms, summed in another order
    CHECK(max_diff(trainer.predict(transformed(images, s), 2), transformed(plain, s)) > 1e-4);
  }
}

TEST_CASE("predict_tta on a non-square input averages the 4 flips", "[tta]") {
  std::string yaml = testing::tiny_config(false);
  const std::string square = "shape: [16, 16, 3]";
  REQUIRE(yaml.find(square) != std::string::npos);
  yaml.replace(yaml.find(square), square.size(), "shape: [16, 12, 3]");
  const Config config = parse_config(yaml, "tiny.yaml");
  Trainer trainer(config, 1, 1);
  Tensor images(Shape{2, 16, 12, 3});
  for (size_t i = 0; i < images.numel(); ++i) images.data()[i] = float((i * 7919) % 256);
  const Tensor tta = predict_tta(trainer, images, 2);
  REQUIRE(tta.shape().nhwc() == Shape{2, 16, 12, 1}.nhwc());
  for (Symmetry s : {1u, 2u, 3u}) {
    INFO("flip " << s);
    CHECK(max_diff(predict_tta(trainer, transformed(images, s), 2), transformed(tta, s)) < 1e-5);
  }
  // The mean of the four flipped predictions, mapped back, by hand.
  Tensor want(tta.shape());
  want.zero();
  for (Symmetry s = 0; s < 4; ++s) {
    const Tensor back = transformed(trainer.predict(transformed(images, s), 2), s);
    for (size_t i = 0; i < want.numel(); ++i) want.data()[i] += back.data()[i] / 4;
  }
  CHECK(max_diff(tta, want) < 1e-6);
}

TEST_CASE("probability_stats of plain predictions match Trainer::evaluate", "[tta]") {
  // Plain, and with a regularized kernel whose penalty both must add.
  const bool regularized = GENERATE(false, true);
  INFO("regularized " << regularized);
  std::string yaml = testing::tiny_config(false);
  const std::string c1 = "activation: relu}";
  if (regularized) yaml.replace(yaml.find(c1), c1.size(), "activation: relu, kernel_regularizer: {type: L2, l2: 0.5}}");
  const Config config = parse_config(yaml, "tiny.yaml");
  Trainer trainer(config, 1, 1);
  REQUIRE((trainer.regularization_penalty() > 0.1) == regularized);
  const Dataset data = testing::tiny_data();
  std::vector<int> idx(size_t(data.size()));
  for (int i = 0; i < data.size(); ++i) idx[size_t(i)] = i;
  const BatchStats want = trainer.evaluate(data, idx, 5);
  const BatchStats got = probability_stats(trainer, trainer.predict(data.images, 5), data.masks);
  CHECK(got.samples == want.samples);
  CHECK(got.loss() == Approx(want.loss()).epsilon(1e-4));  // logit(sigmoid(z)) = z to float precision
  CHECK(got.counts.mean_iou() == Approx(want.counts.mean_iou()).margin(1e-3));
  CHECK(got.counts.dice() == Approx(want.counts.dice()).margin(1e-3));
  CHECK(got.counts.accuracy() == Approx(want.counts.accuracy()).margin(1e-3));
}
