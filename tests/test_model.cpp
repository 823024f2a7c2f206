// Model (the layer DAG): shape errors with file:line:col, the summary's counts,
// backward through skip connections (finite differences), and the forward
// output of a small network against an independent naive implementation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "config/config.h"
#include "core/error.h"
#include "nn/model.h"

using namespace trainer;

namespace {

Config cfg(const std::string& layers) {
  return parse_config("model:\n  layers:\n" + layers + "data: {images: a, masks: b}\ntraining: {epochs: 1}\n", "m.yaml");
}

struct Bound {
  std::vector<float> params, grads, state;
};

Bound bind_init(Model& m, uint64_t seed) {
  Bound b{std::vector<float>(m.num_params()), std::vector<float>(m.num_params()),
          std::vector<float>(m.num_state())};
  m.bind(b.params.data(), b.grads.data(), b.state.data());
  m.initialize(seed, b.params.data(), b.state.data());
  return b;
}

Tensor random_input(Shape s, unsigned seed) {
  Tensor t(s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (size_t i = 0; i < t.numel(); ++i) t.data()[i] = u(rng);
  return t;
}

/// sum(forward(x) * r): the objective whose gradient with respect to the output is r.
double objective(Model& m, const Context& ctx, const Tensor& x, const Tensor& r) {
  const Tensor& y = m.forward(ctx, x);
  double s = 0;
  for (size_t i = 0; i < y.numel(); ++i) s += double(y.data()[i]) * r.data()[i];
  return s;
}

/// The largest |numeric - analytic| / max(1, |numeric|) over b's parameters:
/// numeric by central differences (step 1e-3) of objective(), analytic the
/// gradients b.grads holds (from backward of r after a forward of x).
double worst_gradient_error(Model& m, Bound& b, const Context& ctx, const Tensor& x, const Tensor& r) {
  const std::vector<float> analytic = b.grads;
  const float h = 1e-3f;
  double worst = 0;
  for (size_t i = 0; i < b.params.size(); ++i) {
    const float keep = b.params[i];
    b.params[i] = keep + h;
    const double lp = objective(m, ctx, x, r);
    b.params[i] = keep - h;
    const double lm = objective(m, ctx, x, r);
    b.params[i] = keep;
    const double num = (lp - lm) / (2 * h);
    worst = std::max(worst, std::abs(num - analytic[i]) / std::max(1.0, std::abs(num)));
  }
  return worst;
}

/// A training-mode context after one forward of x and one backward of r
/// (the gradient of objective()), which b's gradients then hold.
Context forward_backward(Model& m, const Tensor& x, const Tensor& r) {
  Context ctx;
  ctx.training = true;
  objective(m, ctx, x, r);
  m.backward(ctx, r);
  return ctx;
}

}  // namespace

TEST_CASE("shapes that do not fit are errors naming the layer and place", "[model]") {
  // 9x9 pooled to 4x4, upsampled to 8x8: cannot be concatenated with 9x9.
  Config c = cfg(R"(    - {name: in, type: Input, shape: [9, 9, 1]}
    - {name: c1, type: Conv2D, filters: 2, kernel_size: 3, padding: same}
    - {name: p1, type: MaxPooling2D}
    - {name: u1, type: UpSampling2D}
    - {name: cat, type: Concatenate, inputs: [u1, c1]}
)");
  try {
    Model m(c.model, c.path);
    FAIL("no error");
  } catch (const UserError& e) {
    std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("m.yaml:7:7: layer 'cat' (Concatenate)"));
    CHECK_THAT(msg, Catch::Contains("[8, 8, 2]"));
    CHECK_THAT(msg, Catch::Contains("[9, 9, 2]"));
  }
}

TEST_CASE("a layer's unknown key is reported by the model with its place", "[model]") {
  Config c = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 1]}
    - {name: c1, type: Conv2D, filter: 2, kernel_size: 3}
)");
  REQUIRE_THROWS_WITH(Model(c.model, c.path),
                      Catch::Contains("m.yaml:4:") && Catch::Contains("'filter'") &&
                          Catch::Contains("did you mean 'filters'"));
  // kernel_size takes an integer or two (Keras); a list of one says both forms.
  Config k = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 1]}
    - {name: c1, type: Conv2D, filters: 2, kernel_size: [3]}
)");
  REQUIRE_THROWS_WITH(Model(k.model, k.path),
                      Catch::Contains("m.yaml:4:") && Catch::Contains("kernel_size") &&
                          Catch::Contains("must be an integer or a list of 2 integers"));
}

TEST_CASE("a Python tuple where a list is wanted says how YAML writes it", "[model]") {
  Config c = cfg("    - {type: Input, shape: [8, 8, 1]}\n"
                 "    - type: Conv2D\n      filters: 2\n      kernel_size: 3\n      strides: (3, 1)\n");
  CHECK_THROWS_WITH(Model(c.model, c.path),
                    Catch::Contains("m.yaml:7:16:") &&
                        Catch::Contains("'strides' must be an integer or a list of 2 integers in [1, 1024], got "
                                        "'(3, 1)'") &&
                        Catch::Contains("(a Python tuple is a YAML list: [3, 1], not (3, 1))"));
}

TEST_CASE("huge sizes are user errors, not overflows or crashes", "[model]") {
  auto error_of = [](const std::string& layers) -> std::string {
    Config c = cfg(layers);
    try {
      Model m(c.model, c.path);
    } catch (const UserError& e) {
      return e.what();
    }
    return "(no error)";
  };
  CHECK_THAT(error_of("    - {name: in, type: Input, shape: [65536, 65536, 3]}\n"),
             Catch::Contains("m.yaml:3:7: layer 'in' (Input)") && Catch::Contains("2^31 values or more"));
  CHECK_THAT(error_of("    - {name: in, type: Input, shape: [8, 8, 1]}\n"
                      "    - {name: c, type: Conv2D, filters: 1, kernel_size: 100000}\n"),
             Catch::Contains("m.yaml:4:") && Catch::Contains("'kernel_size' must be in [1, 1024]"));
  CHECK_THAT(error_of("    - {name: in, type: Input, shape: [1024, 1024, 1]}\n"
                      "    - {name: u1, type: UpSampling2D, size: 1024}\n"),
             Catch::Contains("m.yaml:4:7: layer 'u1' (UpSampling2D)") && Catch::Contains("2^31 values or more"));
  CHECK_THAT(error_of("    - {name: in, type: Input, shape: [2048, 1, 1]}\n"
                      "    - {name: u1, type: UpSampling2D, size: [1024, 1]}\n"),
             Catch::Contains("m.yaml:4:7: layer 'u1' (UpSampling2D)") && Catch::Contains("pixels high or wide"));
  CHECK_THAT(error_of("    - {name: in, type: Input, shape: [65536, 1, 1]}\n"
                      "    - {name: t, type: Conv2DTranspose, filters: 1, kernel_size: 2, strides: 1024}\n"),
             Catch::Contains("m.yaml:4:7: layer 't' (Conv2DTranspose)") && Catch::Contains("pixels high or wide"));
}

TEST_CASE("the seed U-Net has Keras's parameter count", "[model]") {
  Config c = load_config(std::string(TRAINER_SOURCE_DIR) + "/configs/unet.yaml");
  Model m(c.model, c.path);
  CHECK(m.num_params() + m.num_state() == 31031745);
  CHECK(m.output_shape() == Shape{1, 256, 256, 1});
  const std::string s = m.summary();
  // As Keras 3's model.summary() prints them: the batch axis, and the weights' size in bytes.
  CHECK_THAT(s, Catch::Contains("Total params: 31,031,745 (118.38 MB)"));
  CHECK_THAT(s, Catch::Contains("(None, 256, 256, 1)"));
}

TEST_CASE("the squeeze-and-excitation U-Net config adds Keras's SE parameters to the small U-Net's", "[model]") {
  Config small = load_config(std::string(TRAINER_SOURCE_DIR) + "/configs/unet_small_dsb.yaml");
  Config se = load_config(std::string(TRAINER_SOURCE_DIR) + "/configs/unet_small_se_dsb.yaml");
  Model a(small.model, small.path), b(se.model, se.path);
  // Two bias-free Dense per block: C -> C/8 -> C, for C = 64, 128, 256.
  CHECK(b.num_params() == a.num_params() + 2 * (64 * 8 + 128 * 16 + 256 * 32));
  CHECK(b.num_params() == 1962609);
  CHECK(b.output_shape() == Shape{1, 128, 128, 1});
  // Keras's shapes: GlobalAveragePooling2D gives (None, C), the Reshape after it (None, 1, 1, C).
  const std::string s = b.summary();
  CHECK_THAT(s, Catch::Contains("se5 (Multiply)") && Catch::Contains("(None, 8, 8, 256)"));
  CHECK_THAT(s, Catch::Matches("[\\s\\S]*se3_sq \\(GlobalAveragePooling2D\\) +\\(None, 64\\) [\\s\\S]*"));
  CHECK_THAT(s, Catch::Matches("[\\s\\S]*se3_shape \\(Reshape\\) +\\(None, 1, 1, 64\\) [\\s\\S]*"));
  CHECK_THAT(s, Catch::Contains("Non-trainable params: 0 (0.00 B)"));
}

TEST_CASE("backward through skip connections matches finite differences", "[model]") {
  // c1 feeds both the pooling path and the concatenation: its gradient is the
  // sum of two branches.
  Config c = cfg(R"(    - {name: in, type: Input, shape: [6, 6, 2]}
    - {name: c1, type: Conv2D, filters: 3, kernel_size: 3, padding: same, activation: linear}
    - {name: p1, type: MaxPooling2D}
    - {name: c2, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: linear}
    - {name: u1, type: Conv2DTranspose, filters: 3, kernel_size: 2, strides: 2, padding: same}
    - {name: add, type: Add, inputs: [u1, c1]}
    - {name: cat, type: Concatenate, inputs: [add, c1]}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
)");
  Model m(c.model, c.path);
  Bound b = bind_init(m, 11);
  Tensor x = random_input(Shape{2, 6, 6, 2}, 5);
  Tensor r = random_input(Shape{2, 6, 6, 1}, 6);
  const Context ctx = forward_backward(m, x, r);
  CHECK(worst_gradient_error(m, b, ctx, x, r) < 5e-3);  // h small enough that no max-pooling argmax switches
}

TEST_CASE("forward of a small network equals a naive implementation", "[model]") {
  // in -> conv 3x3 same relu (2 filters) -> maxpool 2 -> upsample 2 ->
  // concat with conv output -> conv 1x1 sigmoid. Reference: direct loops in double.
  Config c = cfg(R"(    - {name: in, type: Input, shape: [4, 4, 1]}
    - {name: conv, type: Conv2D, filters: 2, kernel_size: 3, padding: same, activation: relu}
    - {name: pool, type: MaxPooling2D}
    - {name: up, type: UpSampling2D}
    - {name: cat, type: Concatenate, inputs: [up, conv]}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
)");
  Model m(c.model, c.path);
  Bound b = bind_init(m, 3);
  for (auto& v : b.params) v += 0.1f;  // non-zero biases
  Tensor x = random_input(Shape{1, 4, 4, 1}, 9);
  const Tensor& y = m.forward(Context{}, x);
  // params in order: conv kernel [3,3,1,2], conv bias [2], out kernel [1,1,4,1], out bias [1]
  const float* k1 = b.params.data();
  const float* b1 = k1 + 18;
  const float* k2 = b1 + 2;
  const float* b2 = k2 + 4;
  double conv[4][4][2];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int f = 0; f < 2; ++f) {
        double s = b1[f];
        for (int di = -1; di <= 1; ++di)
          for (int dj = -1; dj <= 1; ++dj) {
            int ii = i + di, jj = j + dj;
            if (ii < 0 || jj < 0 || ii > 3 || jj > 3) continue;
            s += double(x.data()[ii * 4 + jj]) * k1[((di + 1) * 3 + (dj + 1)) * 2 + f];
          }
        conv[i][j][f] = std::max(0.0, s);
      }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double feat[4];
      for (int f = 0; f < 2; ++f) {
        int pi = i / 2 * 2, pj = j / 2 * 2;
        feat[f] = std::max({conv[pi][pj][f], conv[pi + 1][pj][f], conv[pi][pj + 1][f], conv[pi + 1][pj + 1][f]});
        feat[2 + f] = conv[i][j][f];
      }
      double z = b2[0];
      for (int k = 0; k < 4; ++k) z += feat[k] * k2[k];
      CHECK(y.data()[i * 4 + j] == Approx(1.0 / (1.0 + std::exp(-z))).epsilon(1e-5));
    }
}

TEST_CASE("backward skips the gradients no trainable weight needs", "[model]") {
  // Nothing before c1 has trainable weights (the BN has neither gamma nor
  // beta; its moving statistics are not trained): the gradients of in, scale
  // and bn would go unused, so backward neither computes c1's input gradient
  // nor runs the backward of scale or bn.
  Config c = cfg(R"(    - {name: in, type: Input, shape: [6, 6, 2]}
    - {name: scale, type: Rescaling, scale: 0.5}
    - {name: bn, type: BatchNormalization, center: false, scale: false}
    - {name: c1, type: Conv2D, filters: 3, kernel_size: 3, padding: same, activation: relu}
    - {name: p1, type: MaxPooling2D}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: linear}
)");
  Model m(c.model, c.path);
  const bool expected[] = {false, false, false, true, true, true};
  for (int i = 0; i < m.num_layers(); ++i) {
    INFO("layer " << m.layer(i).name());
    CHECK(m.needs_gradient(i) == expected[i]);
  }
  Bound b = bind_init(m, 3);
  Tensor x = random_input(Shape{2, 6, 6, 2}, 7);
  Tensor r = random_input(Shape{2, 3, 3, 1}, 8);
  Context ctx;
  ctx.training = true;
  objective(m, ctx, x, r);
  m.set_profiling(true);
  m.backward(ctx, r);
  m.set_profiling(false);
  const std::vector<LayerTime> times = m.layer_times();  // layers 1.. (no Input)
  CHECK(times[0].backward_s == 0);  // scale
  CHECK(times[1].backward_s == 0);  // bn
  CHECK(times[2].backward_s > 0);   // c1
  // The weight gradients are still the derivatives.
  CHECK(worst_gradient_error(m, b, ctx, x, r) < 5e-3);
}

TEST_CASE("a tensor whose storage was released keeps its shape and refuses reads until it has storage again",
          "[model]") {
  Tensor t = random_input(Shape{2, 3, 3, 1}, 1);
  const Buffer<float> storage = t.release_storage();
  CHECK(storage.size() == 18);
  CHECK(t.shape() == Shape{2, 3, 3, 1});
  CHECK(t.capacity(DType::F32) == 0);
  CHECK_THROWS_AS(t.data(), InternalError);
  CHECK_THROWS_AS(t.raw(), InternalError);
  const Tensor copy = t;  // a copy is released too
  CHECK_THROWS_AS(copy.view(), InternalError);
  t.resize(Shape{1, 3, 3, 1});
  CHECK_NOTHROW(t.data()[8] = 1.f);
}

TEST_CASE("a training step holds only the outputs and gradients still to be read and reuses their storage",
          "[model]") {
  // A chain c1..c6 with a skip from c1 to the concatenation: outputs and
  // gradients of [2, 8, 8, 8] (512 floats a sample), cat's [2, 8, 8, 16],
  // out's [2, 8, 8, 1], the input [2, 8, 8, 2].
  Config c = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 2]}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: linear}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: linear}
    - {name: c3, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: linear}
    - {name: c4, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: linear}
    - {name: c5, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: linear}
    - {name: c6, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: linear}
    - {name: cat, type: Concatenate, inputs: [c6, c1]}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: linear}
)");
  Model m(c.model, c.path);
  Bound b = bind_init(m, 5);
  Tensor x = random_input(Shape{2, 8, 8, 2}, 3);
  Tensor r = random_input(Shape{2, 8, 8, 1}, 4);
  const Context ctx = forward_backward(m, x, r);
  const std::vector<float> first = b.grads;
  const size_t held = m.activation_bytes();
  // The most held at once, during cat's backward: the outputs but c6's
  // (read by cat's forward only; out's output takes its storage then): 128
  // + 5 x 512 + 1024 + 512; out's gradient (64, the loss's buffer) and cat's
  // (1024); the two cat's backward writes, c6's (in cat's output's storage,
  // given back once out's backward, its last reader, has run) and c1's (512,
  // to be summed with c2's). Every
  // output and gradient kept to the end of the step would be 4288 + 4672.
  const size_t sample = 2 * sizeof(float);
  CHECK(held == (128 + 5 * 512 + 1024 + 512 + 64 + 1024 + 512) * sample);
  // The next step reuses that storage (nothing grows) and computes the same.
  forward_backward(m, x, r);
  CHECK(m.activation_bytes() == held);
  CHECK(b.grads == first);
  CHECK(worst_gradient_error(m, b, ctx, x, r) < 5e-3);
  // Inference gives each output back once its last reader has run: the
  // most held is the input, c1's (kept for cat), the two of c2..c6 around
  // the layer running (c_k's output goes where c_k-2's was), and cat's; out's
  // takes a spare. The output is what a training forward gives.
  Model infer(c.model, c.path);
  const Bound ib = bind_init(infer, 5);
  const Tensor& y = infer.forward(Context{}, x);
  CHECK(infer.activation_bytes() == (128 + 512 + 2 * 512 + 1024) * sample);
  Context train;
  train.training = true;
  const Tensor& trained = m.forward(train, x);
  REQUIRE(trained.shape() == y.shape());
  CHECK(std::equal(y.data(), y.data() + y.numel(), trained.data()));
}
