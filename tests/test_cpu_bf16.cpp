// bf16 on CPU towers (training.precision bf16 on a CPU with AVX512-BF16 or
// AMX): the CPU ops that take bf16 activations against their fp32 selves on
// the same (bf16-rounded) values, a small U-Net trained in bf16 against the
// same run in fp32, and the fallback to fp32 on a CPU without bf16
// arithmetic. Cases that need the arithmetic skip with a warning elsewhere.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <fstream>
#include <utility>
#include <vector>

#include "backend/cpu/typed_passes.h"
#include "backend/cpu_info.h"
#include "backend/elementwise_ops.h"
#include "backend/ops.h"
#include "config/config.h"
#include "gpu_testing.h"
#include "process_testing.h"
#include "tiny_model.h"
#include "training_compare.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

#define REQUIRE_CPU_BF16()                                                                 \
  do {                                                                                     \
    if (!cpu_has_bf16()) {                                                                 \
      WARN("skipped: this CPU has neither AVX512-BF16 nor AMX (oneDNN's effective ISA)"); \
      return;                                                                              \
    }                                                                                      \
  } while (0)

const Device kCpu{};
const Device kCpuBf16{DeviceKind::CPU, -1, nullptr, Precision::BF16};

/// max |got - ref| <= tol * max |ref| (the scale of a convolution's output).
void check_near(const std::vector<float>& got, const std::vector<float>& ref, double tol) {
  REQUIRE(got.size() == ref.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(double(got[i]) - ref[i]));
    scale = std::max(scale, std::abs(double(ref[i])));
  }
  INFO("max |got - ref| = " << diff << ", max |ref| = " << scale);
  CHECK(diff <= tol * scale);
}

/// One convolution's outputs and gradients for given activation types.
struct ConvResult {
  std::vector<float> y, dx, dkernel, dbias;
};

/// A 3x3 'same' Conv2D (relu, or linear) of x [2, 6, 5, 4] -> [2, 6, 5, 8],
/// or (transpose) a Conv2DTranspose with kernel 2 and strides 2 -> [2, 12, 10, 8],
/// on device d, x and y (dy, dx) stored in types tx and ty, inputs rounded to bf16.
ConvResult run_conv(const Device& d, DType tx, DType ty, Activation act, bool transpose = false) {
  const Shape xs{2, 6, 5, 4}, ys = transpose ? Shape{2, 12, 10, 8} : Shape{2, 6, 5, 8};
  Conv2DParams p;
  p.kh = p.kw = transpose ? 2 : 3;
  p.stride_h = p.stride_w = transpose ? 2 : 1;
  p.same_padding = true;
  const std::vector<float> x = round_bf16(random_values(xs.numel(), 1));
  const std::vector<float> dy = round_bf16(random_values(ys.numel(), 2));
  const std::vector<float> kernel = round_bf16(random_values(size_t(p.kh) * p.kw * 4 * 8, 3, -0.5f, 0.5f));
  const std::vector<float> bias = random_values(8, 4, -0.1f, 0.1f);
  Tensor xt = make_tensor(xs, x, d, tx), yt = make_tensor(ys, std::vector<float>(ys.numel()), d, ty);
  Tensor dyt = make_tensor(ys, dy, d, ty), dxt = make_tensor(xs, std::vector<float>(xs.numel()), d, tx);
  Conv2DOp conv(p);
  Conv2DTransposeOp deconv(p);
  if (transpose) deconv.forward(d, xt.view(), ConvWeights{kernel.data(), bias.data()}, act, yt.view());
  else conv.forward(d, xt.view(), ConvWeights{kernel.data(), bias.data()}, act, yt.view());
  ConvResult r;
  r.dkernel.resize(kernel.size());
  r.dbias.resize(bias.size());
  ConvBackwardArgs a;
  a.act = act;
  a.y = yt.view();
  a.dy = dyt.raw();
  a.x = xt.view();
  a.kernel = kernel.data();
  a.dkernel = r.dkernel.data();
  a.dbias = r.dbias.data();
  a.dx = dxt.raw();
  if (transpose) deconv.backward(d, a);
  else conv.backward(d, a);
  r.y = download(yt);
  r.dx = download(dxt);
  return r;
}

}  // namespace

TEST_CASE("accumulate and Concatenate on the CPU take bf16 activations", "[cpu_bf16]") {
  const Shape a_shape{1, 3, 4, 2}, b_shape{1, 3, 4, 3};
  const std::vector<float> a = round_bf16(random_values(a_shape.numel(), 5)),
                           b = round_bf16(random_values(b_shape.numel(), 6));
  // accumulate: the fp32 sum, rounded once.
  Tensor acc = make_tensor(a_shape, a, kCpu, DType::BF16), add = make_tensor(a_shape, a, kCpu, DType::BF16);
  accumulate(kCpu, DType::BF16, acc.raw(), add.raw(), acc.numel());
  const std::vector<float> sum = download(acc);
  for (size_t i = 0; i < a.size(); ++i) CHECK(sum[i] == round_bf16(a[i] + a[i]));
  // Concatenate: the same elements as in fp32, forward and backward.
  for (DType t : {DType::F32, DType::BF16}) {
    INFO(dtype_name(t));
    Tensor at = make_tensor(a_shape, a, kCpu, t), bt = make_tensor(b_shape, b, kCpu, t);
    Tensor y = make_tensor(Shape{1, 3, 4, 5}, std::vector<float>(60), kCpu, t);
    const void* xs[2] = {at.raw(), bt.raw()};
    const int cs[2] = {2, 3};
    concat_channels_forward(kCpu, t, xs, cs, 2, 12, y.raw(), 5);
    const std::vector<float> got = download(y);
    for (int px = 0; px < 12; ++px) {
      for (int c = 0; c < 2; ++c) CHECK(got[size_t(px * 5 + c)] == a[size_t(px * 2 + c)]);
      for (int c = 0; c < 3; ++c) CHECK(got[size_t(px * 5 + 2 + c)] == b[size_t(px * 3 + c)]);
    }
    Tensor da = make_tensor(a_shape, std::vector<float>(a.size()), kCpu, t);
    void* dxs[2] = {da.raw(), nullptr};
    concat_channels_backward(kCpu, t, y.raw(), 5, 12, cs, 2, dxs);
    CHECK(download(da) == a);
  }
}

TEST_CASE("MaxPooling2D on the CPU gives on bf16 activations the fp32 result on the same values", "[cpu_bf16]") {
  REQUIRE_CPU_BF16();  // oneDNN's bf16 pooling wants AVX-512, which a CPU without bf16 arithmetic may lack
  // Non-overlapping 2x2 windows: the forward selects and each gradient lands once, so both are exact.
  const Shape xs{2, 4, 6, 3}, ys{2, 2, 3, 3};
  const std::vector<float> x = round_bf16(random_values(xs.numel(), 7)), dy = round_bf16(random_values(ys.numel(), 8));
  std::vector<float> y32, dx32;
  for (DType t : {DType::F32, DType::BF16}) {
    INFO(dtype_name(t));
    MaxPool2DOp pool(Pool2DParams{});
    Tensor xt = make_tensor(xs, x, kCpu, t), yt = make_tensor(ys, std::vector<float>(ys.numel()), kCpu, t);
    Tensor dyt = make_tensor(ys, dy, kCpu, t), dxt = make_tensor(xs, std::vector<float>(xs.numel()), kCpu, t);
    pool.forward(kCpu, xt.view(), yt.view(), true);
    pool.backward(kCpu, dyt.view(), dxt.view());
    if (t == DType::F32) {
      y32 = download(yt), dx32 = download(dxt);
    } else {
      CHECK(download(yt) == y32);
      CHECK(download(dxt) == dx32);
    }
  }
}

TEST_CASE("ReLU's bf16 gradient pass on the bits gives the float path's values", "[cpu_bf16]") {
  // y: +0, -0, the smallest subnormal, 1, a negative, +inf, -inf, NaN; dy: values of both signs and infinities.
  const std::vector<uint16_t> ys = {0x0000, 0x8000, 0x0001, 0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7fc0};
  const std::vector<float> dys = {0.f, -0.f, 1.5f, -2.25f, 1e-30f, INFINITY, -INFINITY};
  std::vector<uint16_t> y, dy;
  for (uint16_t a : ys)
    for (float b : dys) y.push_back(a), dy.push_back(float_to_bf16(b));
  std::vector<uint16_t> on_bits(y.size());
  std::vector<float> in_float(y.size());
  const Activation relu{ActivationKind::Relu};
  cpu::typed_activation_backward(relu, DType::BF16, y.data(), dy.data(), DType::BF16, on_bits.data(), y.size());
  cpu::typed_activation_backward(relu, DType::BF16, y.data(), dy.data(), DType::F32, in_float.data(), y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    INFO("y bits " << y[i] << ", dy bits " << dy[i]);
    CHECK(on_bits[i] == float_to_bf16(in_float[i]));
    CHECK(on_bits[i] == (bf16_to_float(y[i]) > 0.f ? dy[i] : 0));
  }
}

TEST_CASE("a bf16 convolution on the CPU follows the fp32 one on the same bf16 inputs", "[cpu_bf16]") {
  REQUIRE_CPU_BF16();
  for (bool transpose : {false, true}) {
    for (Activation act : {Activation{ActivationKind::Relu}, Activation{}, Activation{ActivationKind::Elu, 1.f}}) {
      const ConvResult ref = run_conv(kCpu, DType::F32, DType::F32, act, transpose);
      // bf16 in and out (between two convolutions), fp32 in (after Rescaling), fp32 out (before a thin layer).
      for (auto [tx, ty] : {std::pair{DType::BF16, DType::BF16}, std::pair{DType::F32, DType::BF16},
                            std::pair{DType::BF16, DType::F32}}) {
        INFO((transpose ? "Conv2DTranspose" : "Conv2D") << ", activation " << int(act.kind) << ", x "
                                                        << dtype_name(tx) << ", y " << dtype_name(ty));
        const ConvResult got = run_conv(kCpuBf16, tx, ty, act, transpose);
        // Inputs and kernel are bf16 values already, so only the accumulation
        // order and the rounding of what is stored in bf16 (2^-8 relative,
        // and dz = dy * act'(y) rounded before backward) differ.
        check_near(got.y, ref.y, ty == DType::BF16 ? 1.0 / 128 : 1e-5);
        check_near(got.dx, ref.dx, act.linear() && tx == DType::F32 ? 1e-5 : 1.0 / 64);
        check_near(got.dkernel, ref.dkernel, act.linear() ? 1e-5 : 1.0 / 64);
        check_near(got.dbias, ref.dbias, act.linear() ? 1e-5 : 1.0 / 64);
      }
    }
  }
}

namespace {

/// Largest |bf16 tower - fp32 tower| of a 3x3 'same' Conv2D with `filters`
/// filters on fp32 input and output [2, 6, 5, 8] -> [2, 6, 5, filters] with
/// values that bf16 cannot hold, and the largest |fp32 result|.
std::pair<double, double> bf16_forward_difference(int filters) {
  const Shape xs{2, 6, 5, 8}, ys{2, 6, 5, filters};
  Conv2DParams p;
  p.kh = p.kw = 3;
  p.same_padding = true;
  const std::vector<float> x = random_values(xs.numel(), 11),
                           kernel = random_values(size_t(3 * 3 * 8 * filters), 12, -0.5f, 0.5f);
  std::vector<float> ref(ys.numel()), got(ys.numel());
  for (const Device* d : {&kCpu, &kCpuBf16}) {
    Conv2DOp conv(p);
    conv.forward(*d, {x.data(), DType::F32, xs}, ConvWeights{kernel.data(), nullptr}, Activation{},
                 {d == &kCpu ? ref.data() : got.data(), DType::F32, ys});
  }
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(double(got[i]) - ref[i]));
    scale = std::max(scale, std::abs(double(ref[i])));
  }
  return {diff, scale};
}

}  // namespace

TEST_CASE("a bf16 convolution on the CPU rounds what it reads: it computes in bf16, not fp32", "[cpu_bf16]") {
  REQUIRE_CPU_BF16();
  // An fp32 computation would agree with fp32 to ~1e-6; one in bf16 differs by the input's and
  // kernel's rounding (up to 2^-8 relative each).
  const auto [diff, scale] = bf16_forward_difference(kMinBf16Filters);
  INFO("max |bf16 - fp32| = " << diff << ", max |fp32| = " << scale);
  CHECK(diff > 1e-4 * scale);
  CHECK(diff <= scale / 64);
}

TEST_CASE("a bf16 CPU tower computes a convolution with fewer than kMinBf16Filters filters in fp32", "[cpu_bf16]") {
  REQUIRE_CPU_BF16();
  const auto [diff, scale] = bf16_forward_difference(1);  // a one-filter mask layer (bf16_convolution)
  INFO("max |bf16 tower - fp32 tower| = " << diff << ", max |fp32| = " << scale);
  CHECK(diff <= 1e-6 * scale);
}

TEST_CASE("a U-Net trained on a bf16 CPU tower follows the fp32 one", "[cpu_bf16]") {
  REQUIRE_CPU_BF16();
  const std::string yaml = tiny_unet_config();
  const TrainRun fp32 = train_run("cpu", Precision::FP32, yaml);
  const std::vector<WeightRecord> initial = Trainer(parse_config(yaml, "tiny.yaml"), plan("cpu"), 1).weights();
  for (const char* spec : {"cpu", "cpu:2"}) {
    INFO("--gpus " << spec);
    const TrainRun bf16 = train_run(spec, Precision::BF16, yaml);
    check_losses(bf16.losses, fp32.losses, kLossTolBf16);
    check_weight_changes(bf16.records, fp32.records, initial, kWeightChangeTolBf16);
    // The run was bf16 indeed: it differs from fp32.
    CHECK(bf16.weights != fp32.weights);
  }
}

TEST_CASE("on a CPU without bf16 arithmetic, --precision bf16 says so and trains in fp32", "[cpu_bf16][e2e]") {
  TempDir tmp("cpu_bf16_fallback");
  std::ofstream(tmp.root / "unet.yaml") << sample_unet_config(tmp.root / "run", "  epochs: 1\n");
  // oneDNN's ISA capped below AVX512-BF16, as on a CPU without it.
  const Run r = run("env", "ONEDNN_MAX_CPU_ISA=AVX512_CORE " TRAINER_BINARY " --config " +
                               (tmp.root / "unet.yaml").string() + " --gpus cpu --precision bf16",
                    tmp.root);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("training.precision bf16: this CPU has neither AVX512-BF16 nor AMX, so its "
                                    "towers compute in fp32"));
  CHECK_THAT(r.err, !Catch::Contains("CPU towers: convolutions in bf16"));
}
