// Gradient clipping (the optimizers' clipnorm, global_clipnorm, clipvalue):
// the config's forms, the clamp op, and a training step against Keras's
// formulas applied to the unclipped step's gradient. The model has weight
// regularizers, whose gradient terms Keras clips with the data gradient, and
// two towers with one bucket or one per float must clip the reduced
// gradient exactly as one tower.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <limits>
#include <sstream>

#include "backend/train_ops.h"
#include "config/config.h"
#include "core/error.h"
#include "tiny_model.h"
#include "train/gradient_clipping.h"
#include "train/trainer.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

constexpr double kLearningRate = 0.1;

/// Two convolutions, the first with kernel and bias regularizers; SGD
/// without momentum (a step is w - lr * g) with the given optimizer keys.
std::string clipping_config(const std::string& clip_keys) {
  return R"(
model:
  layers:
    - {name: in, type: Input, shape: [16, 16, 3]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: relu,
       bias_initializer: ones, kernel_regularizer: {type: L1L2, l1: 0.001, l2: 0.01}, bias_regularizer: l2}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data: {images: unused, masks: unused}
training:
  batch_size: 5
  seed: 7
  loss: binary_crossentropy
  optimizer: {type: SGD, learning_rate: 0.1)" +
         clip_keys + R"(}
)";
}

OptimizerConfig optimizer_of(const std::string& clip_keys) {
  return parse_config(clipping_config(clip_keys), "clip.yaml").training.optimizer;
}

std::string config_error(const std::string& clip_keys) {
  try {
    optimizer_of(clip_keys);
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

/// A trainable weight's place in the parameter buffer.
struct Span {
  size_t offset, size;
};

std::vector<Span> trainable_spans(const Model& m) {
  std::vector<Span> spans;
  for (const WeightSlot& w : m.weights())
    if (w.spec.trainable) spans.push_back({w.offset, w.spec.numel()});
  return spans;
}

double norm_of(const std::vector<double>& g, Span s) {
  double q = 0;
  for (size_t i = s.offset; i < s.offset + s.size; ++i) q += g[i] * g[i];
  return std::sqrt(q);
}

/// The largest |a - b| over the elements.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
  return worst;
}

/// x with every digit a double holds, for a config.
std::string exact(double x) {
  std::ostringstream s;
  s << std::setprecision(17) << x;
  return s.str();
}

const std::vector<int> kBatch = {0, 1, 2, 3, 4};

/// The weights after one step of clip_keys' config on 1 tower, and on 2
/// towers with one bucket or one per float (all three must agree).
std::vector<float> clipped_step(const std::string& clip_keys, const Dataset& data) {
  const Config config = parse_config(clipping_config(clip_keys), "clip.yaml");
  Trainer one(config, 1, 1);
  one.train_step(data, kBatch);
  const std::vector<float> w = one.params(0);
  for (size_t bucket_bytes : {Trainer::kBucketBytes, sizeof(float)}) {
    INFO(clip_keys << " on 2 towers, bucket bytes " << bucket_bytes);
    Trainer two(config, 2, 1);
    two.set_bucket_bytes(bucket_bytes);
    two.train_step(data, kBatch);
    CHECK(max_abs_diff(two.params(0), w) < 1e-6);
    CHECK(two.params(1) == two.params(0));
  }
  return w;
}

}  // namespace

TEST_CASE("clipnorm, global_clipnorm and clipvalue take Keras's forms, one at a time", "[clipping]") {
  const OptimizerConfig none = optimizer_of("");
  CHECK(none.clipnorm == 0);
  CHECK(none.global_clipnorm == 0);
  CHECK(none.clipvalue == 0);
  CHECK(optimizer_of(", clipnorm: 1.5").clipnorm == 1.5);
  CHECK(optimizer_of(", global_clipnorm: 2").global_clipnorm == 2);
  CHECK(optimizer_of(", clipvalue: 0.5").clipvalue == 0.5);
  // null is unset (Keras's default); 0 is set but clips nothing, as in Keras.
  CHECK(optimizer_of(", clipnorm: null, clipvalue: 0.5").clipvalue == 0.5);
  CHECK(optimizer_of(", clipnorm: 0").clipnorm == 0);
  CHECK_THAT(config_error(", clipnorm: 0, global_clipnorm: 1"),
             Catch::Contains("'global_clipnorm' is given with 'clipnorm'; only one of clipnorm, clipvalue and "
                             "global_clipnorm can be set (Keras's rule)"));
  CHECK_THAT(config_error(", clipvalue: -1"), Catch::Contains("'clipvalue' must be in [0"));
  CHECK_THAT(config_error(", clip_norm: 1"), Catch::Contains("unknown key 'clip_norm'") &&
                                                 Catch::Contains("did you mean 'clipnorm'"));
  CHECK_THAT(config_error(", clipnorm: [1]"), Catch::Contains("'clipnorm'"));
}

TEST_CASE("clip_by_value clamps to [-v, v] and keeps NaN", "[clipping]") {
  const Device cpu;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> g = {-3.f, -0.5f, 0.f, 0.25f, 2.f, nan, -std::numeric_limits<float>::infinity()};
  clip_by_value(cpu, g.data(), g.size(), 1.f);
  CHECK(g[0] == -1.f);
  CHECK(g[1] == -0.5f);
  CHECK(g[2] == 0.f);
  CHECK(g[3] == 0.25f);
  CHECK(g[4] == 1.f);
  CHECK(std::isnan(g[5]));
  CHECK(g[6] == -1.f);
}

TEST_CASE("GradientClipping on a gradient buffer: zero and non-finite norms as Keras's", "[clipping]") {
  const Device cpu;
  auto slot = [](size_t offset, int n) {
    WeightSlot w;
    w.spec.shape = {n};
    w.offset = offset;
    return w;
  };
  const std::vector<WeightSlot> weights = {slot(0, 2), slot(2, 3)};
  OptimizerConfig o;
  o.clipnorm = 1.0;
  std::vector<float> g = {0.f, 0.f, 3.f, 0.f, 4.f};  // norms 0 (factor 1, no 0/0) and 5
  GradientClipping(o, weights, g.data(), cpu).clip_norms();
  CHECK(g == std::vector<float>{0.f, 0.f, 0.6f, 0.f, 0.8f});
  o.clipnorm = 0, o.global_clipnorm = 2.0;
  g = {0.f, 0.f, 3.f, 0.f, 4.f};
  GradientClipping(o, weights, g.data(), cpu).clip_norms();
  CHECK(g[2] == Approx(1.2f));
  CHECK(g[4] == Approx(1.6f));
  // An infinite gradient makes the global norm infinite: every gradient NaN (tf.clip_by_global_norm).
  g = {1.f, 0.f, std::numeric_limits<float>::infinity(), 0.f, 4.f};
  GradientClipping(o, weights, g.data(), cpu).clip_norms();
  for (float v : g) CHECK(std::isnan(v));
  CHECK_FALSE(GradientClipping(optimizer_of(", clipvalue: 1"), weights, g.data(), cpu).by_norm());
}

TEST_CASE("a clipped step is the unclipped step's gradient clipped by Keras's formulas", "[clipping][multitower]") {
  const Dataset data = tiny_data();
  const Config plain_config = parse_config(clipping_config(""), "clip.yaml");
  Trainer plain(plain_config, 1, 1);
  const std::vector<float> w0 = plain.params(0);
  const std::vector<Span> spans = trainable_spans(plain.model());
  REQUIRE(spans.size() == 4);  // c1 kernel and bias, out kernel and bias
  plain.train_step(data, kBatch);
  const std::vector<float> w1 = plain.params(0);
  // The mean gradient with the regularizers' terms, from w1 = w0 - lr * g.
  std::vector<double> g(w0.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = (double(w0[i]) - w1[i]) / kLearningRate;
  std::vector<double> norms;
  double total = 0;
  for (const Span& s : spans) {
    norms.push_back(norm_of(g, s));
    total += norms.back() * norms.back();
  }
  total = std::sqrt(total);
  /// w0 - lr * (g[i] times the factor of i's weight).
  auto expected = [&](const std::function<double(size_t j, double gi)>& clip) {
    std::vector<float> w(w0.size());
    for (size_t j = 0; j < spans.size(); ++j)
      for (size_t i = spans[j].offset; i < spans[j].offset + spans[j].size; ++i)
        w[i] = float(double(w0[i]) - kLearningRate * clip(j, g[i]));
    return w;
  };

  SECTION("clipnorm: each weight to a norm of at most c") {
    std::vector<double> sorted = norms;
    std::sort(sorted.begin(), sorted.end());
    const double c = (sorted[1] + sorted[2]) / 2;  // two weights above it, two below
    INFO("norms " << norms[0] << " " << norms[1] << " " << norms[2] << " " << norms[3] << ", clipnorm " << c);
    REQUIRE(sorted[2] > 1.05 * c);
    const std::vector<float> got = clipped_step(", clipnorm: " + exact(c), data);
    CHECK(max_abs_diff(got, expected([&](size_t j, double gi) { return gi * c / std::max(norms[j], c); })) < 1e-6);
    CHECK(max_abs_diff(got, w1) > 1e-4);  // the clipped weights moved less
    for (size_t j = 0; j < spans.size(); ++j) {
      double moved = 0;
      for (size_t i = spans[j].offset; i < spans[j].offset + spans[j].size; ++i)
        moved += (double(w0[i]) - got[i]) * (double(w0[i]) - got[i]);
      CHECK(std::sqrt(moved) / kLearningRate == Approx(std::min(norms[j], c)).epsilon(1e-4));
    }
  }
  SECTION("global_clipnorm: all weights together to a norm of at most c") {
    const double c = total / 3;
    const std::vector<float> got = clipped_step(", global_clipnorm: " + exact(c), data);
    CHECK(max_abs_diff(got, expected([&](size_t, double gi) { return gi * c / total; })) < 1e-6);
    // A larger limit than the norm changes nothing.
    CHECK(max_abs_diff(clipped_step(", global_clipnorm: " + exact(2 * total), data), w1) < 1e-7);
  }
  SECTION("clipvalue: every element to [-v, v]") {
    std::vector<double> mags;
    for (double gi : g) mags.push_back(std::abs(gi));
    std::sort(mags.begin(), mags.end());
    const double v = mags[mags.size() / 2];  // half the elements clamped
    const std::vector<float> got = clipped_step(", clipvalue: " + exact(v), data);
    CHECK(max_abs_diff(got, expected([&](size_t, double gi) { return std::clamp(gi, -v, v); })) < 1e-6);
    CHECK(max_abs_diff(got, w1) > 1e-4);
  }
  SECTION("a limit of 0 clips nothing, as Keras's") {
    for (const char* keys : {", clipnorm: 0", ", global_clipnorm: 0", ", clipvalue: 0"}) {
      INFO(keys);
      CHECK(max_abs_diff(clipped_step(keys, data), w1) == 0);
    }
  }
}
