// The memory plan of a GPU tower (train/memory_plan.h): each part against
// figures counted by hand for small models, and the outputs and gradients
// it plans against what a training step really holds on the CPU, step after step.
#include <catch2/catch.hpp>

#include <random>

#include "config/config.h"
#include "nn/model.h"
#include "train/memory_plan.h"

using namespace trainer;

namespace {

Config cfg(const std::string& layers, const std::string& optimizer = "{type: SGD, momentum: 0.9}") {
  return parse_config("model:\n  layers:\n" + layers + "data: {images: a, masks: b}\ntraining: {epochs: 1, optimizer: " +
                          optimizer + "}\n",
                      "m.yaml");
}

// in [8, 8, 3] -> c1 [8, 8, 8] -> p1 [4, 4, 8] -> u1 [8, 8, 8]; cat [u1, c1]
// [8, 8, 16] -> c2 [8, 8, 8] -> out [8, 8, 1]: a U-Net's step down and up.
const char* kSmallUNet = R"(    - {name: in, type: Input, shape: [8, 8, 3]}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {name: p1, type: MaxPooling2D}
    - {name: u1, type: Conv2DTranspose, filters: 8, kernel_size: 2, strides: 2}
    - {name: cat, type: Concatenate, inputs: [u1, c1]}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
)";

/// One training step of a batch of n on the CPU (forward, then backward of
/// a random output gradient written into the model's own buffer, as a loss does).
void train_step(Model& m, int n, unsigned seed) {
  Context ctx;
  ctx.training = true;
  Tensor& x = m.input_buffer();
  x.resize(m.input_shape().with_batch(n));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (size_t i = 0; i < x.numel(); ++i) x.data()[i] = u(rng);
  m.forward(ctx, x);
  Tensor& dy = m.output_grad_buffer();
  dy.resize(m.output_shape().with_batch(n));
  for (size_t i = 0; i < dy.numel(); ++i) dy.data()[i] = u(rng);
  m.backward(ctx, dy);
}

}  // namespace

TEST_CASE("a GPU tower's memory plan counts each part as the tower allocates it", "[memory_plan]") {
  Config c = cfg(kSmallUNet);
  Model m(c.model, c.path);
  // Parameters: c1 3*3*3*8 + 8, u1 2*2*8*8 + 8, c2 3*3*16*8 + 8, out 8 + 1.
  const size_t params = 224 + 264 + 1160 + 9;
  REQUIRE(m.num_params() == params);
  SECTION("fp32") {
    const DeviceMemoryPlan p = plan_device_memory(m, 2, Precision::FP32, c.training.optimizer);
    CHECK(p.weights == params * 4);
    CHECK(p.gradients == params * 4);
    CHECK(p.optimizer == params * 4);  // SGD with momentum: one slot
    // Masks [2, 8, 8, 1] and the staging copy of images [2, 8, 8, 3] and masks.
    CHECK(p.batch_buffers == (128 + 384 + 128) * 4);
    // Outputs in floats: in 384, c1 1024, p1 256, u1 1024, cat 2048, c2
    // 1024, out 128. u1's is read by cat's forward only, and then lent to
    // c2's. The step's peak is c2's backward: every output but u1's (5888 -
    // 1024), out's gradient (128, the loss's buffer), and the gradients c2's
    // backward writes (1024) and reads (2048). The gradients of u1, p1 and c1
    // come later, in storage given back by then (c2's gradient and output, cat's).
    CHECK(p.activations == (5888 - 1024 + 128 + 1024 + 2048) * 4);
    CHECK(p.layer_kept == 0);
    // A ReLU convolution's dz, the output's size: c1's and c2's [2, 8, 8, 8].
    CHECK(p.layer_transient == 1024 * 4);
    // c2's kernel, 3*3*16*8 floats.
    CHECK(p.workspace == 4608);
    CHECK(p.total() == 3 * 6628 + 2560 + 32256 + 4096 + 4608);
  }
  SECTION("bf16") {
    const DeviceMemoryPlan p = plan_device_memory(m, 2, Precision::BF16, c.training.optimizer);
    CHECK(p.weights == params * 4);  // master weights, gradients and slots stay fp32
    CHECK(p.optimizer == params * 4);
    // bf16: c1, p1, u1 and cat; fp32: the input, c2 (which feeds the
    // one-filter out, an fp32 convolution) and out.
    // In 4-byte words: in 384, c1 512, p1 128, u1 512, cat 1024, c2 1024,
    // out 128. out's output takes u1's storage (the smallest spare that
    // holds it once cat's forward has run), so the peak, c2's backward, holds
    // in, c1, p1, u1's storage, cat and c2 (3584 words), out's gradient (128)
    // and c2's (1024) and cat's (1024).
    CHECK(p.activations == (384 + 512 + 128 + 512 + 1024 + 1024 + 128 + 1024 + 1024) * 4);
    // c1 computes in bf16 from the fp32 input: its bf16 copy, kept for the
    // kernel's gradient.
    CHECK(p.layer_kept == 384 * 2);
    // dz of c1 (bf16 [2, 8, 8, 8]) and of c2 (bf16, y being fp32).
    CHECK(p.layer_transient == 1024 * 2);
    // c2's bf16 kernel (2304 bytes) and its bf16 output before it is written as fp32 (2048).
    CHECK(p.workspace == 2304 + 2048);
  }
}

TEST_CASE("the memory plan counts the optimizer's slots and the layers that keep tensors", "[memory_plan]") {
  const std::string layers = R"(    - {name: in, type: Input, shape: [4, 4, 2]}
    - {name: bn, type: BatchNormalization}
    - {name: drop, type: Dropout, rate: 0.5}
    - {name: c, type: Conv2D, filters: 2, kernel_size: 1, activation: gelu}
)";
  Config adam = cfg(layers, "{type: Adam}");
  Model m(adam.model, adam.path);
  const size_t params = 4 + 6;  // bn gamma, beta; c kernel 2*2 and bias 2
  REQUIRE(m.num_params() == params);
  const DeviceMemoryPlan p = plan_device_memory(m, 3, Precision::FP32, adam.training.optimizer);
  CHECK(p.optimizer == 2 * params * 4);  // m and v
  CHECK(p.weights == (params + 4) * 4);  // and the moving mean and variance
  // bn's per-channel vectors (7 floats and 2 doubles a channel), drop's mask
  // (a byte an element of [3, 4, 4, 2]), c's gelu input and its gradient (fp32 [3, 4, 4, 2]).
  CHECK(p.layer_kept == 2 * (7 * 4 + 2 * 8) + 96 + 2 * 96 * 4);
  Config rms = cfg(layers, "{type: RMSprop, centered: true}");
  Model r(rms.model, rms.path);
  CHECK(plan_device_memory(r, 3, Precision::FP32, rms.training.optimizer).optimizer == 2 * params * 4);
  Config sgd = cfg(layers, "{type: SGD}");
  Model s(sgd.model, sgd.path);
  CHECK(plan_device_memory(s, 3, Precision::FP32, sgd.training.optimizer).optimizer == 0);
  CHECK_THROWS_AS(plan_device_memory(s, 0, Precision::FP32, sgd.training.optimizer), UserError);
}

TEST_CASE("the memory plan counts the padded copies of unevenly padded convolutions", "[memory_plan]") {
  // A stride-2 'same' convolution of 8 pixels to 4 pads 0 before and 1
  // after (TensorFlow's rule), which cuDNN cannot: the input is copied padded.
  Config c = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 2]}
    - {name: s2, type: Conv2D, filters: 4, kernel_size: 3, strides: 2, padding: same}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1}
)");
  Model m(c.model, c.path);
  DeviceMemoryPlan p = plan_device_memory(m, 1, Precision::FP32, c.training.optimizer);
  CHECK(p.layer_kept == 9 * 9 * 2 * 4);  // [1, 9, 9, 2] fp32
  CHECK(p.layer_transient == 0);         // linear, fp32 in and out: cuDNN reads dy as it is
  CHECK(p.workspace == 512);             // the kernel (288 bytes, in 256s); the input needs no gradient
  // After a trainable layer the input gradient is computed, padded, in the workspace.
  c = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 2]}
    - {name: c0, type: Conv2D, filters: 2, kernel_size: 1}
    - {name: s2, type: Conv2D, filters: 4, kernel_size: 3, strides: 2, padding: same}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1}
)");
  Model after(c.model, c.path);
  p = plan_device_memory(after, 1, Precision::FP32, c.training.optimizer);
  CHECK(p.layer_kept == 9 * 9 * 2 * 4);
  CHECK(p.workspace == 512 + 768);  // and the padded input gradient (648 bytes)
  // A transposed 'same' convolution of 4 pixels to 8 (kernel 3, strides 2):
  // cuDNN's a is its output [1, 8, 8, 4], padded to [1, 9, 9, 4] (1296 bytes).
  c = cfg(R"(    - {name: in, type: Input, shape: [4, 4, 2]}
    - {name: c0, type: Conv2D, filters: 2, kernel_size: 1}
    - {name: up, type: Conv2DTranspose, filters: 4, kernel_size: 3, strides: 2, padding: same}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1}
)");
  Model up(c.model, c.path);
  p = plan_device_memory(up, 1, Precision::FP32, c.training.optimizer);
  CHECK(p.layer_kept == 0);
  // Its backward: dy as fp32 [1, 8, 8, 4] and padded (1024 + 1296 bytes).
  CHECK(p.layer_transient == 1024 + 1296);
  // Its forward: the kernel (288 bytes) and the padded output before it is cropped, in 256s.
  CHECK(p.workspace == 512 + 1536);
}

TEST_CASE("the planned outputs and gradients are what a training step holds, step after step", "[memory_plan]") {
  // The small U-Net, a chain with a long skip (as tests/test_model.cpp's),
  // a layer feeding three others with a frozen convolution at the start, and
  // a frozen convolution after a trainable one (it computes its input's
  // gradient without reading the input, which is given back after its forward).
  const std::vector<std::string> models = {
      kSmallUNet,
      R"(    - {name: in, type: Input, shape: [8, 8, 2]}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: c3, type: Conv2D, filters: 4, kernel_size: 3, padding: same}
    - {name: c4, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: cat, type: Concatenate, inputs: [c4, c1]}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1}
)",
      R"(    - {name: in, type: Input, shape: [6, 6, 3]}
    - {name: f, type: Conv2D, filters: 4, kernel_size: 3, padding: same, trainable: false}
    - {name: a, type: Conv2D, filters: 4, kernel_size: 3, padding: same}
    - {name: b, type: Conv2D, filters: 4, kernel_size: 1}
    - {name: c, type: Conv2D, filters: 6, kernel_size: 1, inputs: [a]}
    - {name: d, type: Add, inputs: [a, b]}
    - {name: e, type: Concatenate, inputs: [d, c, a]}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
)",
      R"(    - {name: in, type: Input, shape: [6, 6, 2]}
    - {name: a, type: Conv2D, filters: 4, kernel_size: 3, padding: same}
    - {name: f, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: relu, trainable: false}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1}
)"};
  for (const std::string& layers : models)
    for (int n : {3, 5}) {
      Config c = cfg(layers);
      Model m(c.model, c.path);
      std::vector<float> params(m.num_params()), grads(m.num_params()), state(m.num_state());
      m.bind(params.data(), grads.data(), state.data());
      m.initialize(1, params.data(), state.data());
      for (int step = 1; step <= 4; ++step) {
        train_step(m, n, unsigned(step));
        INFO(layers << "batch " << n << ", step " << step);
        CHECK(m.activation_bytes() == m.planned_activation_bytes(n, step));
      }
      CHECK(m.activation_bytes() == m.planned_activation_bytes(n));  // steady by then, as the plan takes it
    }
}
