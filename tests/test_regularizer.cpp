// Weight regularizers (kernel_regularizer, bias_regularizer): the config
// forms Keras accepts, the backend's penalty sums and gradient term against
// hand values, and a training step: the regularized step is the plain step
// plus the penalty's gradient (added once, whatever the tower count), and
// the logged loss and evaluate's loss include the penalty, as Keras's do.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <vector>

#include "backend/train_ops.h"
#include "config/config.h"
#include "core/error.h"
#include "layer_testing.h"
#include "tiny_model.h"
#include "train/trainer.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

Regularizer kernel_regularizer_of(const std::string& value) {
  auto layer = layer_from_yaml("{type: Conv2D, filters: 2, kernel_size: 3, kernel_regularizer: " + value + "}");
  layer->infer({Shape{1, 5, 5, 1}});
  return layer->param_specs()[0].regularizer;
}

std::string regularizer_error(const std::string& value) {
  try {
    kernel_regularizer_of(value);
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

/// A small network with a regularized first convolution (kernel L1L2, bias
/// L2), or none; SGD without momentum, so a step is w - lr * g.
std::string regularized_config(bool regularized) {
  const std::string reg =
      regularized ? ", kernel_regularizer: {type: L1L2, l1: 0.001, l2: 0.01}, bias_regularizer: l2" : "";
  return R"(
model:
  layers:
    - {name: in, type: Input, shape: [16, 16, 3]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: relu,
       bias_initializer: ones)" + reg + R"(}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data: {images: unused, masks: unused}
training:
  batch_size: 5
  seed: 7
  loss: binary_crossentropy
  optimizer: {type: SGD, learning_rate: 0.1}
)";
}

}  // namespace

TEST_CASE("kernel_regularizer and bias_regularizer take Keras's forms", "[regularizer]") {
  CHECK_FALSE(kernel_regularizer_of("null").any());
  Regularizer l2 = kernel_regularizer_of("l2");  // Keras's L2(): 0.01
  CHECK(l2.l1 == 0);
  CHECK(l2.l2 == Approx(0.01));
  CHECK(kernel_regularizer_of("L1").l1 == Approx(0.01));
  CHECK(kernel_regularizer_of("L1").l2 == 0);
  CHECK(kernel_regularizer_of("{type: L2, l2: 0.0001}").l2 == Approx(1e-4));
  Regularizer both = kernel_regularizer_of("{type: L1L2, l1: 0.001}");  // L1L2's l2 defaults to 0
  CHECK(both.l1 == Approx(0.001));
  CHECK(both.l2 == 0);
  CHECK(kernel_regularizer_of("{type: l1, l1: 0.5}").l1 == Approx(0.5));

  auto layer = layer_from_yaml("{type: Conv2DTranspose, filters: 2, kernel_size: 2, bias_regularizer: l1}");
  layer->infer({Shape{1, 3, 3, 1}});
  const auto specs = layer->param_specs();
  CHECK_FALSE(specs[0].regularizer.any());
  CHECK(specs[1].regularizer.l1 == Approx(0.01));

  Regularizer tf2 = kernel_regularizer_of("l1_l2");  // tf.keras 2's l1_l2(): 0.01 and 0.01
  CHECK(tf2.l1 == Approx(0.01));
  CHECK(tf2.l2 == Approx(0.01));

  CHECK_THAT(regularizer_error("l2(1e-4)"),
             Catch::Contains("kernel_regularizer") && Catch::Contains("is Python") &&
                 Catch::Contains("write the mapping {type: L2, l2: 1e-4}"));
  CHECK_THAT(regularizer_error("keras.regularizers.l1(l1=0.05)"),
             Catch::Contains("write the mapping {type: L1, l1: 0.05}"));
  CHECK_THAT(regularizer_error("l2(l1=0.1)"), Catch::Contains("{type: L2, l2: <factor>}"));  // not l2: 0.1
  CHECK_THAT(regularizer_error("'L1L2(l1=1e-5, l2=1e-4)'"),
             Catch::Contains("is Python") && Catch::Contains("{type: L1L2, l1: <factor>, l2: <factor>}"));
  CHECK_THAT(regularizer_error("l1l2"), Catch::Contains("gives no factors") && Catch::Contains("{type: L1L2"));
  CHECK_THAT(regularizer_error("L1L2"), Catch::Contains("gives no factors"));
  CHECK_THAT(regularizer_error("{type: L1L2}"), Catch::Contains("without l1 or l2 does nothing"));
  CHECK(kernel_regularizer_of("{type: L1L2, l1: 0, l2: 0}").any() == false);  // zeros, as written
  CHECK_THAT(regularizer_error("l3"), Catch::Contains("'l3' is not a regularizer") &&
                                          Catch::Contains("did you mean"));
  CHECK_THAT(regularizer_error("{type: L2, l2: -1}"), Catch::Contains("'l2' must be in [0"));
  CHECK_THAT(regularizer_error("{type: L2, l1: 0.1}"), Catch::Contains("unknown key 'l1'"));
  CHECK_THAT(regularizer_error("{type: Orthogonal}"), Catch::Contains("use one of: L1, L2, L1L2"));
  CHECK_THAT(regularizer_error("[0.01]"), Catch::Contains("must be l1, l2 or a mapping"));
  // Known keys, so that a typo gets a suggestion.
  CHECK_THROWS_WITH(layer_from_yaml("{type: Conv2D, filters: 2, kernel_size: 3, kernel_regulariser: l2}"),
                    Catch::Contains("did you mean 'kernel_regularizer'"));
}

TEST_CASE("the regularizer ops: |w| and w^2 sums, and the gradient term", "[regularizer]") {
  const Device cpu;
  const float w[5] = {-2.f, 0.f, 0.5f, 3.f, -0.25f};
  const float* ws[3] = {w, w + 3, w};
  const size_t ns[3] = {5, 2, 0};
  double sums[6];
  abs_and_square_sums(cpu, ws, ns, 3, sums);
  CHECK(sums[0] == 5.75);
  CHECK(sums[1] == 13.3125);
  CHECK(sums[2] == 3.25);
  CHECK(sums[3] == 9.0625);
  CHECK(sums[4] == 0);
  CHECK(sums[5] == 0);
  float g[5] = {1.f, 1.f, 1.f, 1.f, 1.f};
  regularizer_grad(cpu, w, g, 5, 0.1f, 0.5f);  // g + 0.1 sign(w) + w
  CHECK(g[0] == Approx(1 - 0.1 - 2));
  CHECK(g[1] == 1.f);  // sign(0) = 0
  CHECK(g[2] == Approx(1 + 0.1 + 0.5));
  CHECK(g[3] == Approx(1 + 0.1 + 3));
  CHECK(g[4] == Approx(1 - 0.1 - 0.25));
}

TEST_CASE("the |w| and w^2 sums are the same bits for any thread count", "[regularizer][clipping]") {
  // Gradient clipping scales every tower's gradients by a factor from them.
  const Device cpu;
  std::vector<float> w(100003);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i) * 0.37f) * (1.f + float(i % 97));
  const float* ws[1] = {w.data()};
  const size_t ns[1] = {w.size()};
  double ref[2];
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  abs_and_square_sums(cpu, ws, ns, 1, ref);
  for (int t : {2, 3, 7}) {
    omp_set_num_threads(t);
    for (int run = 0; run < 5; ++run) {
      double sums[2];
      abs_and_square_sums(cpu, ws, ns, 1, sums);
      INFO(t << " threads, run " << run);
      CHECK(sums[0] == ref[0]);
      CHECK(sums[1] == ref[1]);
    }
  }
  omp_set_num_threads(threads);
}

TEST_CASE("a regularized step is the plain step plus the penalty's gradient, and the losses include the penalty",
          "[regularizer]") {
  const Config with = parse_config(regularized_config(true), "reg.yaml");
  const Config without = parse_config(regularized_config(false), "plain.yaml");
  const Dataset data = tiny_data();
  const std::vector<int> batch = {0, 1, 2, 3, 4}, held_out = {5, 6, 7, 8, 9, 10, 11, 12};
  Trainer reg(with, 1, 1), plain(without, 1, 1);
  const std::vector<float> w0 = reg.params(0);
  REQUIRE(w0 == plain.params(0));  // the same seed: the same initial weights

  // The penalty at w0: c1's kernel (L1L2) and bias (L2, 0.01; initialised to ones).
  double expected = 0;
  size_t kernel_at = 0, kernel_size = 0, bias_at = 0;
  for (const WeightSlot& s : reg.model().weights()) {
    if (reg.model().layer(s.layer).name() != "c1") continue;
    (s.spec.name == "kernel" ? kernel_at : bias_at) = s.offset;
    if (s.spec.name == "kernel") kernel_size = s.spec.numel();
  }
  for (size_t i = kernel_at; i < kernel_at + kernel_size; ++i)
    expected += 0.001 * std::abs(w0[i]) + 0.01 * double(w0[i]) * w0[i];
  expected += 0.01 * 4;  // four biases of 1
  CHECK(reg.regularization_penalty() == Approx(expected).epsilon(1e-12));
  CHECK(plain.regularization_penalty() == 0);

  const BatchStats a = reg.train_step(data, batch), b = plain.train_step(data, batch);
  CHECK(a.loss() - b.loss() == Approx(expected).epsilon(1e-9));
  const std::vector<float> wa = reg.params(0), wb = plain.params(0);
  double worst = 0;
  for (size_t i = 0; i < w0.size(); ++i) {
    double term = 0;  // lr * the penalty's gradient at w0
    if (i >= kernel_at && i < kernel_at + kernel_size)
      term = 0.1 * (0.001 * ((w0[i] > 0) - (w0[i] < 0)) + 2 * 0.01 * w0[i]);
    if (i >= bias_at && i < bias_at + 4) term = 0.1 * 2 * 0.01 * w0[i];
    worst = std::max(worst, std::abs((double(wb[i]) - term) - wa[i]));
  }
  CHECK(worst < 1e-6);
  REQUIRE(std::abs(double(wa[bias_at]) - wb[bias_at]) > 1e-4);  // the bias term moved it

  // Two towers add the penalty and its gradient once, after the all-reduce,
  // with one gradient bucket or one per weight.
  for (size_t bucket_bytes : {Trainer::kBucketBytes, sizeof(float)}) {
    INFO("bucket bytes " << bucket_bytes);
    Trainer two(with, 2, 1);
    two.set_bucket_bytes(bucket_bytes);
    CHECK(two.train_step(data, batch).loss() == Approx(a.loss()).epsilon(1e-6));
    const std::vector<float> w2 = two.params(0);
    for (size_t i = 0; i < w0.size(); ++i) REQUIRE(w2[i] == Approx(wa[i]).margin(1e-6));
    CHECK(two.params(1) == w2);
  }

  // evaluate: the data loss at the current weights plus the penalty there,
  // on 1 tower and on 3 (batches of 2: a tower without samples).
  Trainer same(without, 1, 1);
  same.set_weights(reg.params(0), reg.state(0));
  const double data_loss = same.evaluate(data, held_out, 4).loss();
  const double want = data_loss + reg.regularization_penalty();
  CHECK(reg.evaluate(data, held_out, 4).loss() == Approx(want).epsilon(1e-9));
  Trainer three(with, 3, 1);
  three.set_weights(reg.params(0), reg.state(0));
  CHECK(three.evaluate(data, held_out, 2).loss() == Approx(want).epsilon(1e-6));
  // A batch of 1 on 2 towers (one without samples) counts the penalty once.
  Trainer one(with, 1, 1), pair(with, 2, 1);
  CHECK(pair.train_step(data, {3}).loss() == Approx(one.train_step(data, {3}).loss()).epsilon(1e-6));
  CHECK(reg.regularization_penalty() < expected);  // the step shrank the weights
}
