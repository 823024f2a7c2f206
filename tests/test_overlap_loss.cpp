// Keras 3's Dice and Tversky losses: the config's forms and errors, the
// values of Keras's docstring example, its formulas written independently
// here (on probabilities, in double), every gradient against central finite
// differences, one ratio over the global batch whatever the towers (shards
// that add their sums, empty shards included), training's and evaluate's
// losses against the formula on predict's probabilities, the same over K
// softmax channels and one-hot masks, and resume's report.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "dist/local_communicator.h"
#include "layer_testing.h"
#include "tiny_model.h"
#include "train/loss.h"
#include "train/resume_check.h"
#include "train/trainer.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// A one-filter sigmoid model on 16x16x3 without BatchNormalization or
/// Dropout (the training forward is predict's), trained with `loss`.
std::string overlap_config(const std::string& loss, const std::string& extra = "") {
  return R"(
model:
  layers:
    - {name: in, type: Input, shape: [16, 16, 3]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: relu}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data: {images: unused, masks: unused}
training:
  batch_size: 13
  seed: 3
  loss: )" + loss + "\n" + extra + "  optimizer: {type: SGD, learning_rate: 0.1}\n";
}

LossConfig parse_loss(const std::string& loss) { return parse_config(overlap_config(loss), "dice.yaml").training.loss; }

std::string loss_error(const std::string& loss) {
  try {
    parse_loss(loss);
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

/// tiny_config(true) (synchronized BatchNormalization, Dropout, a skip) with `loss`.
Config tiny_with_loss(const std::string& loss) {
  std::string yaml = tiny_config(true);
  const std::string from = "loss: bce_dice";
  REQUIRE(yaml.find(from) != std::string::npos);
  yaml.replace(yaml.find(from), from.size(), "loss: " + loss);
  return parse_config(yaml, "tiny.yaml");
}

/// Keras 3's dice and tversky (keras/src/losses/losses.py) of probabilities
/// p against targets y, values [lo, hi) of them: one ratio of their sums.
double keras_dice(const std::vector<double>& p, const std::vector<double>& y, size_t lo, size_t hi) {
  double i = 0, sp = 0, sy = 0;
  for (size_t k = lo; k < hi; ++k) i += y[k] * p[k], sp += p[k], sy += y[k];
  return 1 - 2 * i / (sy + sp + 1e-7);
}
double keras_tversky(const std::vector<double>& p, const std::vector<double>& y, size_t lo, size_t hi, double alpha,
                     double beta) {
  double i = 0, fp = 0, fn = 0;
  for (size_t k = lo; k < hi; ++k) i += y[k] * p[k], fp += (1 - p[k]) * y[k], fn += p[k] * (1 - y[k]);
  return 1 - i / (i + fp * alpha + fn * beta + 1e-7);
}

double sig(double z) { return 1 / (1 + std::exp(-z)); }

std::vector<double> probabilities(const Tensor& logits) {
  std::vector<double> p(logits.numel());
  for (size_t i = 0; i < p.size(); ++i) p[i] = sig(logits.data()[i]);
  return p;
}
std::vector<double> values(const Tensor& t) { return std::vector<double>(t.data(), t.data() + t.numel()); }

/// softmax(z) over z's channels (in double) and the one-hot encoding of the
/// class indices y [N, H, W, 1] (keras.utils.to_categorical), both [N, H, W, K].
std::vector<double> softmax_probabilities(const Tensor& z) {
  const size_t k = size_t(z.shape().c);
  std::vector<double> p(z.numel());
  for (size_t px = 0; px < z.numel() / k; ++px) {
    double sum = 0;
    for (size_t j = 0; j < k; ++j) sum += p[px * k + j] = std::exp(double(z.data()[px * k + j]));
    for (size_t j = 0; j < k; ++j) p[px * k + j] /= sum;
  }
  return p;
}
std::vector<double> one_hot(const Tensor& y, size_t k) {
  std::vector<double> t(y.numel() * k, 0.0);
  for (size_t px = 0; px < y.numel(); ++px) t[px * k + size_t(y.data()[px])] = 1.0;
  return t;
}

/// overlap_config's model ending in `classes` softmax filters.
std::string softmax_overlap_config(const std::string& loss, int classes, const std::string& extra = "") {
  std::string yaml = overlap_config(loss, extra);
  const std::string out = "filters: 1, kernel_size: 1, activation: sigmoid";
  yaml.replace(yaml.find(out), out.size(),
               "filters: " + std::to_string(classes) + ", kernel_size: 1, activation: softmax");
  return yaml;
}

OverlapForm form_of(double alpha, double beta, bool per_image) {
  OverlapForm f;
  f.alpha = alpha, f.beta = beta, f.per_image = per_image;
  return f;
}

/// loss_sum of kind (Tversky's alpha, beta) on logits z and targets y
/// against Keras's formula on their probabilities p and targets t (the same
/// values, t.size() / N per image: one-hot over K channels), pooled and per
/// image, and both gradients against central finite differences.
void check_against_keras(LossKind kind, double alpha, double beta, const Tensor& z, const Tensor& y,
                         const std::vector<double>& p, const std::vector<double>& t) {
  INFO("kind " << int(kind) << " alpha " << alpha << " beta " << beta);
  const int n = z.shape().n;
  const size_t m = t.size() / size_t(n);
  auto keras = [&](size_t lo, size_t hi) {
    return kind == LossKind::KerasDice ? keras_dice(p, t, lo, hi) : keras_tversky(p, t, lo, hi, alpha, beta);
  };
  double images = 0;
  for (int k = 0; k < n; ++k) images += keras(size_t(k) * m, size_t(k + 1) * m);
  const OverlapForm pooled = form_of(alpha, beta, false), each = form_of(alpha, beta, true);
  CHECK(loss_sum(kind, z, y, nullptr, std::nullopt, {}, pooled) == Approx(n * keras(0, t.size())).epsilon(1e-6));
  CHECK(loss_sum(kind, z, y, nullptr, std::nullopt, {}, each) == Approx(images).epsilon(1e-6));
  CHECK(loss_gradient_gap(kind, {}, z, y, pooled) < 2e-3);
  CHECK(loss_gradient_gap(kind, {}, z, y, each) < 2e-3);
}

}  // namespace

TEST_CASE("Dice and Tversky take Keras 3's names, arguments and defaults", "[loss][overlap]") {
  const LossConfig dice = parse_loss("Dice");
  CHECK(dice.kind == LossKind::KerasDice);
  CHECK(std::string(loss_name(dice.kind)) == "Dice");
  CHECK_FALSE(dice.per_image);
  CHECK(parse_loss("dice").kind == LossKind::Dice);  // the per-image soft Dice with smooth 1 stays
  CHECK(parse_loss("{type: Dice, axis: [1, 2, 3]}").per_image);
  CHECK(parse_loss("{type: Dice, axis: [-3, -2, -1]}").per_image);
  CHECK(parse_loss("{type: Dice, axis: [2, 1]}").per_image);  // one channel: each image's pixels
  CHECK_FALSE(parse_loss("{type: Dice, axis: null}").per_image);
  CHECK_FALSE(parse_loss("{type: Dice, axis: [0, 1, 2, 3], from_logits: false, name: d}").per_image);

  const LossConfig t = parse_loss("tversky");
  CHECK(t.kind == LossKind::Tversky);
  CHECK(std::string(loss_name(t.kind)) == "tversky");
  CHECK(t.tversky_alpha == 0.5);
  CHECK(t.tversky_beta == 0.5);
  const LossConfig u = parse_loss("{type: Tversky, alpha: 0.7, beta: 0.3, axis: [1, 2, 3]}");
  CHECK(u.kind == LossKind::Tversky);
  const OverlapForm f = overlap_form(u);
  CHECK(f.alpha == 0.7);
  CHECK(f.beta == 0.3);
  CHECK(f.per_image);
  CHECK(pools_batch(LossKind::Tversky, overlap_form(t)));
  CHECK_FALSE(pools_batch(LossKind::Tversky, f));
  CHECK_FALSE(pools_batch(LossKind::Dice, OverlapForm{}));

  CHECK_THAT(loss_error("{type: Dice, axis: -1}"), Catch::Contains("Dice takes None") && Catch::Contains("[1, 2, 3]"));
  CHECK_THAT(loss_error("{type: Tversky, axis: [1]}"), Catch::Contains("Tversky takes None"));
  CHECK_THAT(loss_error("{type: Dice, axis: [1, 2, x]}"), Catch::Contains("Dice takes None"));
  CHECK_THAT(loss_error("{type: Dice, alpha: 0.3}"), Catch::Contains("unknown key 'alpha'"));
  CHECK_THAT(loss_error("{type: Dice, label_smoothing: 0.1}"), Catch::Contains("unknown key 'label_smoothing'"));
  CHECK_THAT(loss_error("{type: Tversky, beta: -0.5}"), Catch::Contains("'beta' must be in [0, "));
  CHECK_THAT(loss_error("{type: Tversky, alpha: -0.1}"), Catch::Contains("'alpha' must be in [0, "));
  CHECK_THAT(loss_error("{type: Tversky, alpha: 0, beta: 0}"),
             Catch::Contains("'alpha' and 'beta' are both 0") && Catch::Contains("nothing would train"));
  CHECK(parse_loss("{type: Tversky, alpha: 0, beta: 1}").tversky_beta == 1);  // one of them 0 is a loss
  CHECK_THAT(loss_error("{type: Dice, axis: None}"),
             Catch::Contains("'axis' is None, Python's word; YAML's is null: write 'axis: null'"));
  CHECK_THAT(loss_error("{type: Dice, axis: [1, 2, 2, 3]}"), Catch::Contains("each axis once"));
  CHECK_THAT(loss_error("{type: Dice, axis: [1, -3, 3]}"), Catch::Contains("each axis once"));  // -3 is 1
  CHECK_THAT(loss_error("{type: dice, axis: [1, 2, 3]}"),
             Catch::Contains("'axis' must be -1") && Catch::Contains("write type: Dice"));
  CHECK_THAT(loss_error("{type: Tversky, reduction: sum}"), Catch::Contains("only Keras's default"));
}

TEST_CASE("Dice and Tversky give the values of Keras's docstring example", "[loss][overlap]") {
  // keras.losses.Dice's example: y_true [[1, 1], [0, 0]] twice, y_pred
  // [[0, 1], [0, 1]] and [[0.4, 0], [0, 0.9]]; Dice() 0.6164384, Dice(axis=(1,
  // 2, 3)) [0.5, 0.75757575]. Logits +-30 stand for 1 and 0.
  auto logit = [](double p) { return p == 0 ? -30.f : p == 1 ? 30.f : float(std::log(p / (1 - p))); };
  const std::vector<double> pred = {0, 1, 0, 1, 0.4, 0, 0, 0.9};
  std::vector<float> z;
  for (double p : pred) z.push_back(logit(p));
  const Tensor logits = make_tensor(Shape{2, 2, 2, 1}, z), y = make_tensor(Shape{2, 2, 2, 1}, {1, 1, 0, 0, 1, 1, 0, 0});
  const OverlapForm pooled, per_image = form_of(0.5, 0.5, true);
  // loss_sum: the batch's loss times its 2 samples, or the sum of the images' losses.
  CHECK(loss_sum(LossKind::KerasDice, logits, y, nullptr, std::nullopt, {}, pooled) ==
        Approx(2 * 0.6164384).epsilon(1e-6));
  CHECK(loss_sum(LossKind::KerasDice, logits, y, nullptr, std::nullopt, {}, per_image) ==
        Approx(0.5 + 0.75757575).epsilon(1e-6));
  // Tversky(alpha=0.7, beta=0.3) by hand from Keras's code: image 1 has I = 1,
  // sum y(1 - p) = 1, sum p(1 - y) = 1, so 1 - 1 / 2; image 2 I = 0.4, 1.6 and
  // 0.9, so 1 - 0.4 / 1.79; pooled I = 1.4, 2.6 and 1.9, so 1 - 1.4 / 3.79.
  CHECK(loss_sum(LossKind::Tversky, logits, y, nullptr, std::nullopt, {}, form_of(0.7, 0.3, true)) ==
        Approx(0.5 + (1 - 0.4 / 1.79)).epsilon(1e-6));
  CHECK(loss_sum(LossKind::Tversky, logits, y, nullptr, std::nullopt, {}, form_of(0.7, 0.3, false)) ==
        Approx(2 * (1 - 1.4 / 3.79)).epsilon(1e-6));
}

TEST_CASE("Dice and Tversky match Keras's formulas, pooled or per image, and their gradients finite differences",
          "[loss][overlap]") {
  const Shape s{3, 4, 5, 1};
  const Tensor z = random_tensor(s, 21, -3.f, 3.f);
  Tensor y = random_tensor(s, 22, 0.f, 1.f);
  for (size_t i = 0; i < y.numel(); ++i) y.data()[i] = y.data()[i] > 0.6f ? 1.f : 0.f;
  const std::vector<double> p = probabilities(z), t = values(y);
  const size_t m = s.sample_numel(), all = s.numel();
  struct Case {
    LossKind kind;
    double alpha, beta;
  };
  // alpha + beta > 1 too: the denominator's I term is then negative.
  for (const Case c : {Case{LossKind::KerasDice, 0.5, 0.5}, Case{LossKind::Tversky, 0.5, 0.5},
                       Case{LossKind::Tversky, 0.7, 0.3}, Case{LossKind::Tversky, 0.9, 0.8},
                       Case{LossKind::Tversky, 0.0, 1.0}, Case{LossKind::Tversky, 1.0, 0.0}}) {
    check_against_keras(c.kind, c.alpha, c.beta, z, y, p, t);
  }
  // The pooled ratio is not the mean of the images' ratios on this batch.
  REQUIRE(std::abs(keras_dice(p, t, 0, all) - (keras_dice(p, t, 0, m) + keras_dice(p, t, m, 2 * m) +
                                               keras_dice(p, t, 2 * m, all)) / 3) > 1e-3);
}

TEST_CASE("an empty mask: per image Dice and Tversky are 1 with no gradient, pooled its prediction still counts",
          "[loss][overlap]") {
  // Sample 0's mask is empty, sample 1's not; both predict something everywhere.
  const Shape s{2, 3, 3, 1};
  const Tensor z = random_tensor(s, 41, -2.f, 2.f);
  Tensor y = random_tensor(s, 42, 0.f, 1.f);
  for (size_t i = 0; i < y.numel(); ++i) y.data()[i] = i < s.sample_numel() ? 0.f : (y.data()[i] > 0.4f ? 1.f : 0.f);
  const std::vector<double> p = probabilities(z), t = values(y);
  const size_t m = s.sample_numel();
  for (const LossKind kind : {LossKind::KerasDice, LossKind::Tversky}) {
    INFO("kind " << int(kind));
    const OverlapForm each = form_of(0.3, 0.7, true), pooled = form_of(0.3, 0.7, false);
    auto keras = [&](size_t lo, size_t hi) {
      return kind == LossKind::KerasDice ? keras_dice(p, t, lo, hi) : keras_tversky(p, t, lo, hi, 0.3, 0.7);
    };
    Tensor g;
    CHECK(loss_sum(kind, z, y, &g, std::nullopt, {}, each) == Approx(1.0 + keras(m, 2 * m)).epsilon(1e-6));
    for (size_t i = 0; i < m; ++i) REQUIRE(g.data()[i] == 0.f);  // as Keras: I = 0 leaves nothing to move
    bool moved = false;
    for (size_t i = m; i < 2 * m; ++i) moved = moved || g.data()[i] != 0.f;
    CHECK(moved);
    // Pooled, the empty image's predictions add to P (false positives): a gradient there too.
    CHECK(loss_sum(kind, z, y, &g, std::nullopt, {}, pooled) == Approx(2 * keras(0, 2 * m)).epsilon(1e-6));
    for (size_t i = 0; i < m; ++i) REQUIRE(g.data()[i] > 0.f);  // lowering p there lowers the loss
  }
}

TEST_CASE("a pooled Dice over shards that add their sums is the whole batch's loss and gradient",
          "[loss][overlap][towers]") {
  // 5 samples over 3 shards of 3, 2 and 0 samples, each on its own thread,
  // reducing through a LocalCommunicator as towers do.
  const Shape s{5, 3, 4, 1};
  const Tensor z = random_tensor(s, 31, -2.f, 2.f);
  Tensor y = random_tensor(s, 32, 0.f, 1.f);
  for (size_t i = 0; i < y.numel(); ++i) y.data()[i] = y.data()[i] > 0.5f ? 1.f : 0.f;
  for (const LossKind kind : {LossKind::KerasDice, LossKind::Tversky}) {
    INFO("kind " << int(kind));
    const OverlapForm f = form_of(0.7, 0.3, false);
    Tensor whole_grad;
    const double whole = loss_sum(kind, z, y, &whole_grad, std::nullopt, {}, f);
    const int bounds[] = {0, 3, 5, 5};
    LocalCommunicator comm(3);
    double shard_sum[3] = {};
    std::vector<Tensor> grads(3);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r)
      threads.emplace_back([&, r] {
        const ShardReduce reduce = [&comm, r](double* v, size_t n) { comm.all_reduce_sum(r, v, n); };
        const int lo = bounds[r], hi = bounds[r + 1];
        if (lo == hi) return join_pooled_loss(reduce);
        const size_t m = s.sample_numel();
        const Tensor zs = make_tensor(s.with_batch(hi - lo), std::vector<float>(z.sample(lo), z.sample(lo) + (hi - lo) * m));
        const Tensor ys = make_tensor(s.with_batch(hi - lo), std::vector<float>(y.sample(lo), y.sample(lo) + (hi - lo) * m));
        shard_sum[r] = loss_sum(kind, zs, ys, &grads[size_t(r)], std::nullopt, {}, f, reduce);
      });
    for (std::thread& th : threads) th.join();
    CHECK(shard_sum[0] + shard_sum[1] + shard_sum[2] == Approx(whole).epsilon(1e-12));
    CHECK(shard_sum[0] / 3 == Approx(whole / 5).epsilon(1e-12));  // each sample carries the batch's loss
    for (int r = 0; r < 2; ++r)
      for (size_t i = 0; i < grads[size_t(r)].numel(); ++i)
        REQUIRE(grads[size_t(r)].data()[i] == Approx(whole_grad.sample(bounds[r])[i]).epsilon(1e-6));
  }
}

TEST_CASE("Dice and Tversky train on 1, 2 and 3 towers to one tower's weights, pooled or per image",
          "[loss][overlap][towers][multitower]") {
  // Batches of 5 and 3 over 2 and 3 towers, and of 2 over 3 (an empty shard):
  // a ratio over each tower's shard alone would not reach one tower's weights.
  for (const std::string loss : {"Dice", "{type: Tversky, alpha: 0.7, beta: 0.3}",
                                 "{type: Tversky, alpha: 0.3, beta: 0.7, axis: [1, 2, 3]}"}) {
    INFO("loss " << loss);
    check_towers_reach_one_tower(tiny_with_loss(loss));
  }
  // Evaluation in batches of 4 of 13 samples, the last of 1 leaving two of 3 towers empty.
  const Config config = tiny_with_loss("Dice");
  const Dataset data = tiny_data();
  std::vector<int> all(13);
  for (int i = 0; i < 13; ++i) all[size_t(i)] = i;
  Trainer one(config, 1, 1), three(config, 3, 1);
  const BatchStats a = one.evaluate(data, all, 4), b = three.evaluate(data, all, 4);
  CHECK(b.samples == 13);
  CHECK(b.loss() == Approx(a.loss()).epsilon(1e-9));
}

TEST_CASE("training and evaluate compute Keras's Dice and Tversky of predict's probabilities", "[loss][overlap]") {
  const Dataset data = tiny_data();
  std::vector<int> all(13);
  for (int i = 0; i < 13; ++i) all[size_t(i)] = i;
  const std::vector<double> t = values(data.masks);
  const size_t m = data.masks.shape().sample_numel();
  const struct {
    std::string loss;
    bool dice, per_image;
    double alpha, beta;
  } cases[] = {{"Dice", true, false, 0.5, 0.5},
               {"{type: Dice, axis: [1, 2, 3]}", true, true, 0.5, 0.5},
               {"{type: Tversky, alpha: 0.8, beta: 0.4}", false, false, 0.8, 0.4}};
  for (const auto& c : cases) {
    INFO(c.loss);
    Trainer trainer(parse_config(overlap_config(c.loss), "dice.yaml"), 2, 1);
    const Tensor probs = trainer.predict(data.images, 13);
    const std::vector<double> p = values(probs);
    // A batch of samples [lo, hi): its loss, Keras's sum_over_batch_size of the
    // images' losses (axis [1, 2, 3]) or one ratio over its pixels.
    auto batch_loss = [&](size_t lo, size_t hi) {
      auto ratio = [&](size_t a, size_t b) {
        return c.dice ? keras_dice(p, t, a * m, b * m) : keras_tversky(p, t, a * m, b * m, c.alpha, c.beta);
      };
      if (!c.per_image) return ratio(lo, hi);
      double sum = 0;
      for (size_t k = lo; k < hi; ++k) sum += ratio(k, k + 1);
      return sum / double(hi - lo);
    };
    // Validation batches of 5: 5, 5 and 3 samples, each batch's loss weighted by its samples (Keras's loss tracker).
    const double val = (5 * batch_loss(0, 5) + 5 * batch_loss(5, 10) + 3 * batch_loss(10, 13)) / 13;
    CHECK(trainer.evaluate(data, all, 5).loss() == Approx(val).epsilon(1e-5));
    CHECK(trainer.train_step(data, all).loss() == Approx(batch_loss(0, 13)).epsilon(1e-5));
  }
}

TEST_CASE("Dice and Tversky over K softmax channels are Keras's of the one-hot masks, pooled or per image, and "
          "their gradients finite differences",
          "[loss][overlap][categorical]") {
  // Keras 3.15 (JAX backend) on one-hot y_true and softmax y_pred gave the
  // same values as these formulas to 1e-7 (Dice and Tversky(0.7, 0.4), axis
  // None and [1, 2, 3]); here both sides are written out.
  const Shape s{3, 4, 5, 3};
  Tensor z = random_tensor(s, 51, -3.f, 3.f);
  Tensor y(Shape{s.n, s.h, s.w, 1});
  for (size_t i = 0; i < y.numel(); ++i) y.data()[i] = float((i * 7 + i / 5) % 3);
  // Sample 0 predicts its classes well, the others at random: their ratios differ.
  for (size_t i = 0; i < size_t(s.h) * size_t(s.w); ++i) z.data()[i * 3 + size_t(y.data()[i])] += 4.f;
  const std::vector<double> p = softmax_probabilities(z), t = one_hot(y, 3);
  const size_t m = s.sample_numel(), all = s.numel();
  struct Case {
    LossKind kind;
    double alpha, beta;
  };
  for (const Case c : {Case{LossKind::KerasDice, 0.5, 0.5}, Case{LossKind::Tversky, 0.7, 0.4},
                       Case{LossKind::Tversky, 0.0, 1.0}}) {
    check_against_keras(c.kind, c.alpha, c.beta, z, y, p, t);
  }
  // Over one-hot targets every image has P = Y = H W, so Dice (and Tversky
  // with alpha + beta = 1) is linear in I: pooled or per image give the same
  // mean. Tversky(0.7, 0.4) is not, so there the two forms differ.
  auto tv = [&](size_t lo, size_t hi) { return keras_tversky(p, t, lo, hi, 0.7, 0.4); };
  CHECK(keras_dice(p, t, 0, all) ==
        Approx((keras_dice(p, t, 0, m) + keras_dice(p, t, m, 2 * m) + keras_dice(p, t, 2 * m, all)) / 3));
  REQUIRE(std::abs(tv(0, all) - (tv(0, m) + tv(m, 2 * m) + tv(2 * m, all)) / 3) > 1e-3);
  // Targets of another size than the logits' are refused.
  CHECK_THROWS_AS(loss_sum(LossKind::KerasDice, z, Tensor(Shape{3, 4, 4, 1}), nullptr), InternalError);
}

TEST_CASE("a K-class softmax model trains with Dice and Tversky on towers to one tower's weights, and evaluate's "
          "loss is Keras's of predict's probabilities",
          "[loss][overlap][categorical][towers][multitower]") {
  // Over one-hot masks Dice (and Tversky with alpha + beta = 1) is linear in I, so shards would add up to the
  // batch even without the towers' reduce; pooled Tversky(0.7, 0.4) is not, and needs it.
  for (const std::string loss : {"Dice", "{type: Tversky, alpha: 0.7, beta: 0.4}",
                                 "{type: Tversky, alpha: 0.3, beta: 0.7, axis: [1, 2, 3]}"}) {
    INFO("loss " << loss);
    std::string yaml = testing::tiny_classes_config(3);
    const std::string from = "loss: sparse_categorical_crossentropy";
    REQUIRE(yaml.find(from) != std::string::npos);
    yaml.replace(yaml.find(from), from.size(), "loss: " + loss);
    const Config config = parse_config(yaml, "classes.yaml");
    REQUIRE(Trainer(config, 1, 1).classes() == 3);
    check_towers_reach_one_tower(config, tiny_class_data());
  }
  // Evaluate in one batch of all 13 samples: Dice of predict's probabilities against the one-hot masks.
  const Dataset data = tiny_class_data();
  std::vector<int> all(13);
  for (int i = 0; i < 13; ++i) all[size_t(i)] = i;
  for (const bool dice : {true, false}) {
    INFO((dice ? "Dice" : "Tversky(0.7, 0.4)"));
    Trainer trainer(parse_config(softmax_overlap_config(dice ? "Dice" : "{type: Tversky, alpha: 0.7, beta: 0.4}", 3),
                                 "dice.yaml"),
                    2, 1);
    const Tensor probs = trainer.predict(data.images, 13);
    REQUIRE(probs.shape().c == 3);
    const std::vector<double> p = values(probs), t = one_hot(data.masks, 3);
    const BatchStats stats = trainer.evaluate(data, all, 13);  // one batch over the 2 towers: their sums add
    CHECK(stats.loss() == Approx(dice ? keras_dice(p, t, 0, p.size()) : keras_tversky(p, t, 0, p.size(), 0.7, 0.4))
                              .epsilon(1e-5));
    CHECK(stats.counts.classes() == 3);  // the metrics count the 3 classes' confusion
  }
}

TEST_CASE("Dice and Tversky refuse class weights and axis [1, 2] over classes, and resume reports their arguments",
          "[loss][overlap][resume]") {
  const Config weighted = parse_config(overlap_config("Dice", "  class_weight: [1, 3]\n"), "dice.yaml");
  CHECK_THROWS_WITH(Trainer(weighted, 1, 1), Catch::Contains("ratio of sums over the pixels") &&
                                                 Catch::Contains("use binary_crossentropy"));
  const Config weighted_classes =
      parse_config(softmax_overlap_config("Dice", 3, "  class_weight: [1, 3, 2]\n"), "dice.yaml");
  CHECK_THROWS_WITH(Trainer(weighted_classes, 1, 1), Catch::Contains("ratio of sums over the pixels") &&
                                                         Catch::Contains("use sparse_categorical_crossentropy"));
  // axis [1, 2]: per image on one channel, per image and class in Keras over K channels.
  CHECK(Trainer(parse_config(overlap_config("{type: Tversky, axis: [1, 2]}"), "dice.yaml"), 1, 1).classes() == 0);
  CHECK_THROWS_WITH(Trainer(parse_config(softmax_overlap_config("{type: Tversky, axis: [1, 2]}", 3), "dice.yaml"), 1, 1),
                    Catch::StartsWith("dice.yaml:") &&
                        Catch::Contains("axis [1, 2] leaves out the channels, which over the model's 3 softmax "
                                        "channels is, in Keras, one ratio per image and class") &&
                        Catch::Contains("use axis [1, 2, 3]"));
  CHECK(Trainer(parse_config(softmax_overlap_config("{type: Tversky, axis: [1, 2, 3]}", 3), "dice.yaml"), 1, 1)
            .classes() == 3);

  auto differences = [](const std::string& now, const std::string& then) {
    return resume_differences(parse_config(overlap_config(now), "dice.yaml"),
                              parse_config(overlap_config(then), "dice.yaml"), "last.h5");
  };
  using V = std::vector<std::string>;
  CHECK(differences("{type: Dice, axis: [1, 2, 3]}", "Dice") ==
        V{"training.loss.axis is [1, 2, 3] (the checkpoint's run used null)"});
  CHECK(differences("{type: Tversky, alpha: 0.7}", "{type: Tversky, beta: 0.2}") ==
        V{"training.loss.alpha is 0.7 (the checkpoint's run used 0.5)",
          "training.loss.beta is 0.5 (the checkpoint's run used 0.2)"});
  CHECK(differences("Dice", "tversky") == V{"training.loss is Dice (the checkpoint's run used tversky)"});
  CHECK(differences("{type: Tversky, alpha: 0.5}", "tversky").empty());
}
