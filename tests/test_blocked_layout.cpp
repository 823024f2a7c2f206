// Activations in oneDNN's blocked layout between CPU Winograd convolutions
// (Layout::Blocked16, Model::set_activation_layouts): that such a
// convolution reads and writes blocked views as blocked, which edges of a
// model take the layout, and that a model with them computes what the same
// model with NHWC everywhere does, output and weight gradients alike, over
// several training steps and in inference on another batch size.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backend/ops.h"
#include "config/config.h"
#include "core/tensor.h"
#include "gpu_testing.h"
#include "nn/model.h"

using namespace trainer;

namespace {

// c1 -> c2 -> c3 are Winograd-sized (3x3, 32 and 48 channels, 20x20); c3's
// consumer is a 1x1 convolution and p1's a pooling, which take NHWC only.
const char* const kLayers = R"(    - {name: in, type: Input, shape: [20, 20, 32]}
    - {name: c1, type: Conv2D, filters: 32, kernel_size: 3, padding: same, activation: relu}
    - {name: c2, type: Conv2D, filters: 32, kernel_size: 3, padding: same, activation: relu}
    - {name: c3, type: Conv2D, filters: 48, kernel_size: 3, padding: same, activation: relu}
    - {name: c4, type: Conv2D, filters: 16, kernel_size: 1, activation: linear}
)";

Config config() {
  return parse_config(std::string("model:\n  layers:\n") + kLayers + "data: {images: a, masks: b}\ntraining: {epochs: 1}\n",
                      "m.yaml");
}

Tensor random_tensor(Shape s, unsigned seed) { return testing::make_tensor(s, testing::random_values(s.numel(), seed), Device{}); }

/// A model on the CPU with the same weights (seed 5) as every other one made here.
struct Run {
  Model m;
  std::vector<float> params, grads, state;
  explicit Run(bool layouts) : m(config().model, "m.yaml") {
    params.resize(m.num_params()), grads.resize(m.num_params()), state.resize(m.num_state());
    m.set_device(Device{});
    m.set_activation_type(DType::F32);
    if (layouts) m.set_activation_layouts(Device{});
    m.bind(params.data(), grads.data(), state.data());
    m.initialize(5, params.data(), state.data());
  }
  /// One training step's forward of x and backward of dy; the output.
  std::vector<float> step(const Tensor& x, const Tensor& dy) {
    Context ctx;
    ctx.training = true;
    const Tensor& y = m.forward(ctx, x);
    std::vector<float> out(y.data(), y.data() + y.numel());
    m.backward(ctx, dy);
    return out;
  }
};

/// x [N, H, W, C] (NHWC) rearranged into Layout::Blocked16: [N, C / 16, H, W, 16].
std::vector<float> to_blocked16(const std::vector<float>& x, Shape s) {
  std::vector<float> out(x.size());
  for (int n = 0; n < s.n; ++n)
    for (int p = 0; p < s.h * s.w; ++p)
      for (int c = 0; c < s.c; ++c)
        out[((size_t(n) * (s.c / 16) + c / 16) * (s.h * s.w) + p) * 16 + c % 16] = x[(size_t(n) * s.h * s.w + p) * s.c + c];
  return out;
}

}  // namespace

TEST_CASE("a CPU Winograd convolution reads and writes Layout::Blocked16 views as blocked", "[conv]") {
  const Shape xs{2, 18, 18, 32}, ys{2, 18, 18, 48};
  Conv2DParams p;
  p.kh = p.kw = 3;
  p.same_padding = true;
  Conv2DOp probe(p);
  if (!probe.takes_blocked(Device{}, xs, ys, DType::F32, DType::F32)) {
    WARN("skipped: oneDNN has no Winograd kernels on this CPU (they need AVX-512)");
    return;
  }
  const std::vector<float> x = testing::random_values(xs.numel(), 1), dy = testing::random_values(ys.numel(), 2);
  const std::vector<float> kernel = testing::random_values(size_t(9 * 32 * 48), 3, -0.2f, 0.2f);
  std::vector<float> y_nhwc(ys.numel()), dx_nhwc(xs.numel());
  for (Layout l : {Layout::NHWC, Layout::Blocked16}) {
    INFO((l == Layout::NHWC ? "NHWC" : "blocked"));
    const bool b = l == Layout::Blocked16;
    const std::vector<float> xin = b ? to_blocked16(x, xs) : x, dyin = b ? to_blocked16(dy, ys) : dy;
    std::vector<float> y(ys.numel()), dx(xs.numel()), dkernel(kernel.size());
    Conv2DOp conv(p);
    const Activation relu{ActivationKind::Relu};
    conv.forward(Device{}, {xin.data(), DType::F32, xs, l}, ConvWeights{kernel.data(), nullptr}, relu,
                 {y.data(), DType::F32, ys, l});
    ConvBackwardArgs a;
    a.act = relu;
    a.y = {y.data(), DType::F32, ys, l};
    a.dy = dyin.data();
    a.x = {xin.data(), DType::F32, xs, l};
    a.kernel = kernel.data();
    a.dkernel = dkernel.data();
    a.dx = dx.data();
    conv.backward(Device{}, a);
    if (!b) {
      y_nhwc = y, dx_nhwc = dx;
      continue;
    }
    CHECK(y == to_blocked16(y_nhwc, ys));
    CHECK(dx == to_blocked16(dx_nhwc, xs));
  }
}

TEST_CASE("CPU Winograd convolutions in a row pass blocked activations and compute what NHWC ones do", "[model]") {
  Run blocked(true), plain(false);
  if (blocked.m.activation_layout(1) != Layout::Blocked16) {
    WARN("skipped: oneDNN has no Winograd kernels on this CPU (they need AVX-512)");
    return;
  }
  CHECK(blocked.m.activation_layout(0) == Layout::NHWC);  // the input
  CHECK(blocked.m.activation_layout(2) == Layout::Blocked16);
  CHECK(blocked.m.activation_layout(3) == Layout::NHWC);  // c4 (1x1) reads NHWC
  CHECK(blocked.m.activation_layout(4) == Layout::NHWC);  // the output
  for (int i = 0; i < plain.m.num_layers(); ++i) CHECK(plain.m.activation_layout(i) == Layout::NHWC);
  for (unsigned step = 0; step < 3; ++step) {  // new values in the same buffers each step
    INFO("step " << step);
    const Tensor x = random_tensor(Shape{2, 20, 20, 32}, 10 + step), dy = random_tensor(Shape{2, 20, 20, 16}, 20 + step);
    CHECK(blocked.step(x, dy) == plain.step(x, dy));
    CHECK(blocked.grads == plain.grads);  // the same reorders' values: equal to the bit
    for (size_t i = 0; i < blocked.params.size(); ++i)  // as an optimizer would, so the steps differ
      blocked.params[i] -= 0.01f * blocked.grads[i], plain.params[i] -= 0.01f * plain.grads[i];
  }
  // Inference on a smaller batch (a validation set's last one).
  const Tensor x = random_tensor(Shape{1, 20, 20, 32}, 30);
  Context infer;
  const Tensor& yb = blocked.m.forward(infer, x);
  const std::vector<float> got(yb.data(), yb.data() + yb.numel());
  const Tensor& yp = plain.m.forward(infer, x);
  CHECK(got == std::vector<float>(yp.data(), yp.data() + yp.numel()));
}
