// Activation storage types (core/dtype.h): a Tensor's type and its byte
// size, which layers of a model Model::set_activation_type stores as bf16
// (the seed U-Net, and the demotions around fp32-only layers, Uniform layers
// and the model's ends), and which precision CPU towers take. The bf16
// arithmetic itself: test_cpu_bf16.cpp, test_gpu_ops.cpp, test_gpu_training.cpp.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>

#include "backend/cpu_info.h"
#include "backend/ops.h"
#include "config/config.h"
#include "core/error.h"
#include "core/tensor.h"
#include "nn/model.h"
#include "tiny_model.h"
#include "train/trainer.h"

using namespace trainer;

namespace {

Config cfg(const std::string& layers) {
  return parse_config("model:\n  layers:\n" + layers + "data: {images: a, masks: b}\ntraining: {epochs: 1}\n", "m.yaml");
}

/// Layer name -> "fp32" | "bf16" after set_activation_type(t).
std::map<std::string, std::string> types_of(Model& m, DType t) {
  m.set_activation_type(t);
  std::map<std::string, std::string> out;
  for (int i = 0; i < m.num_layers(); ++i) out[m.layer(i).name()] = dtype_name(m.activation_type(i));
  return out;
}

/// The plan's invariants after set_activation_type(BF16): the first and last
/// layers are fp32; an fp32-only layer reads and writes fp32 (an AnyInput
/// one writes fp32); a Uniform
/// layer's inputs have its type; every input of a layer is a type it takes.
void check_plan_invariants(Model& m) {
  m.set_activation_type(DType::BF16);
  const int last = m.num_layers() - 1;
  CHECK(m.activation_type(0) == DType::F32);
  CHECK(m.activation_type(last) == DType::F32);
  for (int i = 1; i <= last; ++i) {
    INFO("layer " << m.layer(i).name());
    const DType out = m.activation_type(i);
    const DTypeSupport s = m.layer(i).dtype_support();
    for (int j : m.layer_inputs(i)) {
      if (s == DTypeSupport::F32Only) CHECK(m.activation_type(j) == DType::F32);
      if (s == DTypeSupport::Uniform) CHECK(m.activation_type(j) == out);
    }
    if (s == DTypeSupport::F32Only || s == DTypeSupport::AnyInput) CHECK(out == DType::F32);
  }
}

}  // namespace

TEST_CASE("a bf16 tensor holds 2 bytes an element and has no fp32 view", "[dtype]") {
  Tensor t(Shape{1, 3, 3, 1});
  CHECK(t.dtype() == DType::F32);
  CHECK(t.bytes() == 36);
  t.set_dtype(DType::BF16);
  CHECK(t.shape() == (Shape{1, 3, 3, 1}));
  CHECK(t.bytes() == 18);
  CHECK(t.buffer().size() == 5);  // 9 elements in 4-byte words
  CHECK(t.raw() != nullptr);
  CHECK_THROWS_AS(t.data(), InternalError);
  Tensor copy(t);
  CHECK(copy.dtype() == DType::BF16);
  Tensor assigned;
  assigned = t;
  CHECK(assigned.dtype() == DType::BF16);
  CHECK(assigned.bytes() == 18);
  t.resize(Shape{2, 3, 3, 1});  // resize keeps the type
  CHECK(t.dtype() == DType::BF16);
  CHECK(t.buffer().size() == 9);
}

TEST_CASE("a bf16 U-Net keeps bf16 between its convolutions and fp32 at both ends", "[dtype]") {
  const Config c = load_config(TRAINER_SOURCE_DIR "/configs/unet.yaml");
  Model m(c.model, c.path);
  m.use_logits_output();
  auto types = types_of(m, DType::BF16);
  CHECK(types["image"] == "fp32");    // the batch is uploaded as fp32
  CHECK(types["rescale"] == "fp32");  // Rescaling computes in fp32 only
  for (const char* name : {"conv1a", "conv1b", "pool1", "conv5b", "up6", "cat6", "conv6a", "up9", "cat9", "conv9a"})
    CHECK(types[name] == "bf16");
  // The one-filter mask layer runs in tf32 on fp32 tensors (kMinBf16Filters),
  // so it reads conv9b's output as fp32; and the loss reads fp32 logits.
  CHECK(types["conv9b"] == "fp32");
  CHECK(types["mask"] == "fp32");
  int bf16 = 0;  // docs/gpu.md quotes this count from the training log
  for (auto& [name, type] : types) bf16 += type == "bf16";
  CHECK(bf16 == 29);
  CHECK(m.num_layers() == 33);
  for (auto& [name, type] : types_of(m, DType::F32)) CHECK(type == "fp32");
}

TEST_CASE("the tiny U-Net of the GPU bf16 training test is bf16 but for its ends and c3", "[dtype]") {
  const Config c = parse_config(testing::tiny_unet_config(), "tiny.yaml");
  Model m(c.model, c.path);
  for (auto& [name, type] : types_of(m, DType::BF16)) {
    INFO(name);
    // c3 feeds the one-filter output layer, which runs in tf32 on fp32.
    CHECK(type == (name == "in" || name == "scale" || name == "c3" || name == "out" ? "fp32" : "bf16"));
  }
}

TEST_CASE("bf16 stops at fp32-only layers and at Uniform layers with an fp32 input", "[dtype]") {
  // c1 -> p1 -> act (fp32 only): p1 must be fp32, so c1 (feeding an fp32 pooling) too.
  // c2 feeds a Concatenate with the fp32 Input: the concatenation and c2 are fp32.
  // c3 reads that fp32 concatenation but may write bf16 for c4; c4 feeds the
  // 8-filter c5, which writes fp32 for the 4-filter c6 (fewer than
  // kMinBf16Filters: fp32 only) before the fp32 output.
  Config c = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 2]}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: p1, type: MaxPooling2D}
    - {name: act, type: Activation, activation: relu}
    - {name: up, type: UpSampling2D}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: cat, type: Concatenate, inputs: [c2, in]}
    - {name: c3, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: c4, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: c5, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: c6, type: Conv2D, filters: 4, kernel_size: 3, padding: same}
    - {name: out, type: Conv2D, filters: 8, kernel_size: 1, activation: sigmoid}
)");
  Model m(c.model, c.path);
  auto types = types_of(m, DType::BF16);
  for (const char* name : {"in", "c1", "p1", "act", "up", "c2", "cat", "c5", "c6", "out"}) {
    INFO(name);
    CHECK(types[name] == "fp32");
  }
  CHECK(types["c3"] == "bf16");
  CHECK(types["c4"] == "bf16");
}

TEST_CASE("a Cropping2D skip of a 'valid' U-Net level keeps bf16 through the crop and the concatenation",
          "[dtype]") {
  Config c = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 1]}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3}
    - {name: crop, type: Cropping2D, cropping: 1, inputs: [c1]}
    - {name: cat, type: Concatenate, inputs: [crop, c2]}
    - {name: c3, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: up, type: Conv2DTranspose, filters: 8, kernel_size: 3}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1}
)");
  Model m(c.model, c.path);
  auto types = types_of(m, DType::BF16);
  for (const char* name : {"c1", "c2", "crop", "cat", "c3"}) {
    INFO(name);
    CHECK(types[name] == "bf16");
  }
  CHECK(types["out"] == "fp32");
}

TEST_CASE("a transposed convolution counts its input channels as cuDNN's filters", "[dtype]") {
  // u1 runs as a convolution from its output to its 4-channel input: K = 4 <
  // kMinBf16Filters, so it is fp32 only although it has 16 filters (and c1,
  // feeding the 4-filter c2, stays fp32 too); u2 has K = 16 and is bf16.
  Config c = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 1]}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: c2, type: Conv2D, filters: 4, kernel_size: 3, padding: same}
    - {name: u1, type: Conv2DTranspose, filters: 16, kernel_size: 2, strides: 2, padding: same}
    - {name: u2, type: Conv2DTranspose, filters: 8, kernel_size: 2, strides: 2, padding: same}
    - {name: out, type: Conv2D, filters: 8, kernel_size: 1}
)");
  Model m(c.model, c.path);
  auto types = types_of(m, DType::BF16);
  CHECK(types["c1"] == "fp32");
  CHECK(types["c2"] == "fp32");
  CHECK(types["u1"] == "fp32");
  CHECK(types["u2"] == "bf16");
}

TEST_CASE("a Uniform layer at the output keeps its inputs fp32", "[dtype]") {
  Config c = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 1]}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: p1, type: MaxPooling2D}
)");
  Model m(c.model, c.path);
  auto types = types_of(m, DType::BF16);
  CHECK(types["c1"] == "bf16");
  CHECK(types["c2"] == "fp32");
  CHECK(types["p1"] == "fp32");
}

TEST_CASE("CPU towers store bf16 activations under training.precision bf16 where the CPU has bf16 arithmetic",
          "[dtype]") {
  Config c = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 1]}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: c3, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
)");
  c.training.precision = Precision::BF16;
  Trainer t(c, 2, 1);
  const DType inside = cpu_has_bf16() ? DType::BF16 : DType::F32;
  CHECK(t.devices().device(0).precision == (cpu_has_bf16() ? Precision::BF16 : Precision::FP32));
  CHECK(t.model().activation_type(0) == DType::F32);
  CHECK(t.model().activation_type(1) == inside);
  CHECK(t.model().activation_type(2) == DType::F32);  // feeds the one-filter output layer
  CHECK(t.model().activation_type(3) == DType::F32);
  c.training.precision = Precision::TF32;  // CPUs have no tf32: fp32
  Trainer f(c, 1, 1);
  CHECK(f.devices().device(0).precision == Precision::FP32);
  for (int i = 0; i < f.model().num_layers(); ++i) CHECK(f.model().activation_type(i) == DType::F32);
}

TEST_CASE("every shipped config and odd DAGs get a bf16 plan every layer can run", "[dtype]") {
  for (const auto& entry : std::filesystem::directory_iterator(TRAINER_SOURCE_DIR "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path());
    const Config c = load_config(entry.path().string());
    Model m(c.model, c.path);
    m.use_logits_output();
    check_plan_invariants(m);
  }
  // A Concatenate of one tensor with itself, a branch that does not reach the
  // output, BN and Dropout beside bf16 layers.
  Config c = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 1]}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: twice, type: Concatenate, inputs: [c2, c2]}
    - {name: dead, type: Conv2D, filters: 8, kernel_size: 3, padding: same, inputs: [c1]}
    - {name: bn, type: BatchNormalization, inputs: [twice]}
    - {name: c3, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: drop, type: Dropout, rate: 0.1}
    - {name: c4, type: Conv2D, filters: 8, kernel_size: 3, padding: same, inputs: [twice]}
    - {name: p, type: MaxPooling2D}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
)");
  Model m(c.model, c.path);
  check_plan_invariants(m);
  auto types = types_of(m, DType::BF16);
  CHECK(types["c2"] == "fp32");    // feeds 'twice', which feeds BN (fp32 only)
  CHECK(types["twice"] == "fp32");
  CHECK(types["dead"] == "bf16");  // no consumer: nothing demotes it
  CHECK(types["c4"] == "fp32");    // feeds the pooling that feeds the thin output convolution
}

TEST_CASE("a convolution whose activation needs its input reads bf16 but writes fp32", "[dtype][activation]") {
  // g (gelu, kept pre-activation) reads c1's bf16 and writes fp32: p1 (a
  // Uniform pooling of g) is then fp32; c2 reads it and writes bf16 again for
  // s (swish), which writes fp32 for the output.
  Config c = cfg(R"(    - {name: in, type: Input, shape: [8, 8, 2]}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {name: g, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: gelu}
    - {name: p1, type: MaxPooling2D}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same}
    - {name: s, type: Conv2DTranspose, filters: 8, kernel_size: 2, strides: 2, activation: swish}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
)");
  Model m(c.model, c.path);
  check_plan_invariants(m);
  auto types = types_of(m, DType::BF16);
  CHECK(types["c1"] == "bf16");
  CHECK(types["g"] == "fp32");
  CHECK(types["p1"] == "fp32");
  CHECK(types["c2"] == "bf16");
  CHECK(types["s"] == "fp32");
}
