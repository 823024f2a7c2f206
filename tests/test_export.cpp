// trainer export: a model trained for one epoch by the binary, exported to
// ONNX, read back with OpenCV's dnn module and run on real images, matches
// Trainer::predict (the path of `trainer predict`) within 1e-4; bad paths exit
// with 2 and a message naming the file.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <onnx/onnx_pb.h>
#include <opencv2/dnn.hpp>
#include <sstream>

#include "config/config.h"
#include "core/build_id.h"
#include "data/image_decode.h"
#include "io/checkpoint.h"
#include "nn/onnx_export.h"
#include "process_testing.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace trainer;
using namespace trainer::testing;

namespace {

const std::string kSample = std::string(TRAINER_SOURCE_DIR) + "/data/sample";
constexpr int kSide = 42;

// Every layer type at 42x42: a 'same' stride-2 conv (42 -> 21, pads 0/1), a
// 'same' pool on an odd size (21 -> 11, pads 0/1), a stride-2 transposed conv
// that crops one pixel at the end (21 -> 42), BN with and without beta, a
// GroupNormalization, a LayerNormalization, a
// Rescaling with an offset, Dropout, UpSampling2D (nearest, and bilinear by
// [2, 3]), Concatenate, Add, an
// asymmetric Cropping2D of a 'valid' transposed conv (42 -> 44 -> 42), an
// asymmetric ZeroPadding2D before a 'valid' conv (42 -> 45 -> 42), a dilated
// conv padded asymmetrically (span 5x4), an attention gate (a one-channel
// sigmoid map Multiply broadcasts over the features), an AveragePooling2D
// padded asymmetrically, a per-channel PReLU, a squeeze-and-excitation block
// (GlobalAveragePooling2D, Reshape, Dense, a [1, 1, C] Multiply), a
// GlobalMaxPooling2D scale, a per-sample [1, 1, 1] factor, an Add of
// [1, 1, C] and [1, 1, 1] terms to the features, Reshapes around convs that move values between
// channels and pixels (42x42x4 -> 42x84x2 -> 42x42x4) or regroup the pixels
// (42x42 -> 21x84), a Dense on every pixel, a DepthwiseConv2D (multiplier 2)
// and a grouped stride-2 Conv2D (ONNX Conv 'group'), a SeparableConv2D (a
// grouped Conv and a 1x1 Conv), and every
// activation (the activation strings and the layers with their parameters)
// but gelu, whose Erf OpenCV 4.6 does not read (its own test below).
std::string export_net(const fs::path& out_dir) {
  return R"(model:
  name: export_net
  layers:
    - {name: input, type: Input, shape: [42, 42, 3]}
    - {name: scale, type: Rescaling, scale: 0.00784313725490196, offset: -1}
    - {name: c1, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: elu}
    - {name: bn1, type: BatchNormalization, momentum: 0.5}
    - {name: gn, type: GroupNormalization, groups: 2}
    - {name: ln, type: LayerNormalization, epsilon: 0.01}
    - {name: down, type: Conv2D, filters: 8, kernel_size: 3, strides: 2, padding: same, activation: leaky_relu}
    - {name: pool, type: MaxPooling2D, pool_size: 2, padding: same}
    - {name: avg, type: AveragePooling2D, pool_size: 2, strides: 1, padding: same}
    - {name: drop, type: Dropout, rate: 0.2}
    - {name: leaky, type: LeakyReLU, negative_slope: 0.1}
    - {name: prelu, type: PReLU, shared_axes: [1, 2], alpha_initializer: glorot_uniform}
    - {name: up, type: UpSampling2D, size: 2}
    - {name: trim, type: Conv2D, filters: 8, kernel_size: 2, activation: tanh}
    - {name: upb, type: UpSampling2D, size: [2, 3], interpolation: bilinear, inputs: [prelu]}
    - {name: trimb, type: Conv2D, filters: 4, kernel_size: [2, 13], activation: relu6, inputs: [upb]}
    - {name: cat, type: Concatenate, inputs: [trim, down, trimb]}
    - {name: upt, type: Conv2DTranspose, filters: 4, kernel_size: 3, strides: 2, padding: same, activation: selu}
    - {name: upk1, type: Conv2DTranspose, filters: 4, kernel_size: 1, strides: 2, inputs: [cat]}
    - {name: sum, type: Add, inputs: [upt, bn1, upk1]}
    - {name: gate, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
    - {name: attend, type: Multiply, inputs: [gate, sum]}
    - {name: attend2, type: Multiply, inputs: [attend, gate]}
    - {name: elu, type: ELU, alpha: 0.5}
    - {name: relu, type: ReLU, negative_slope: 0.3}
    - {name: act, type: Activation, activation: softplus}
    - {name: capped, type: ReLU, max_value: 0.8, negative_slope: 0.1}
    - {name: hsig, type: Activation, activation: hard_sigmoid}
    - {name: ssign, type: Activation, activation: softsign}
    - {name: expo, type: Activation, activation: exponential}
    - {name: hswish, type: Activation, activation: hard_swish}
    - {name: mish, type: Activation, activation: mish}
    - {name: silu_conv, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: silu}
    - {name: bn2, type: BatchNormalization, center: false, momentum: 0.5}
    - {name: grow, type: Conv2DTranspose, filters: 4, kernel_size: 3}
    - {name: crop, type: Cropping2D, cropping: [[1, 1], [2, 0]]}
    - {name: pad, type: ZeroPadding2D, padding: [[1, 2], [0, 3]]}
    - {name: shrink, type: Conv2D, filters: 4, kernel_size: 4, activation: relu}
    - {name: squeeze, type: GlobalAveragePooling2D}
    - {name: squeeze_shape, type: Reshape, target_shape: [1, 1, 4]}
    - {name: excite1, type: Dense, units: 2, activation: relu}
    - {name: excite2, type: Dense, units: 4, activation: sigmoid}
    - {name: se, type: Multiply, inputs: [shrink, excite2]}
    - {name: peak, type: GlobalMaxPooling2D, keepdims: true}
    - {name: se2, type: Multiply, inputs: [peak, se]}
    - {name: gain, type: Dense, units: 1, activation: sigmoid, inputs: [peak]}
    - {name: gained, type: Multiply, inputs: [se2, gain]}
    - {name: shifted, type: Add, inputs: [excite2, gained, gain]}
    - {name: fold, type: Reshape, target_shape: [42, 84, -1]}
    - {name: folded, type: Conv2D, filters: 2, kernel_size: 3, padding: same}
    - {name: unfold, type: Reshape, target_shape: [42, 42, 4]}
    - {name: regroup, type: Reshape, target_shape: [21, 84, 4]}
    - {name: regrouped, type: Conv2D, filters: 4, kernel_size: 3, padding: same}
    - {name: ungroup, type: Reshape, target_shape: [42, 42, 4]}
    - {name: mix, type: Dense, units: 4, activation: tanh}
    - {name: atrous, type: Conv2D, filters: 4, kernel_size: [3, 2], dilation_rate: [2, 3], padding: same}
    - {name: depthwise, type: DepthwiseConv2D, kernel_size: 3, depth_multiplier: 2, padding: same, activation: relu}
    - {name: grouped, type: Conv2D, filters: 4, kernel_size: 3, groups: 2, strides: 2, padding: same}
    - {name: regrow, type: UpSampling2D, size: 2}
    - {name: separable, type: SeparableConv2D, filters: 4, kernel_size: 3, depth_multiplier: 2, padding: same, activation: elu}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data:
  images: )" + kSample + R"(/images
  masks: )" + kSample + R"(/masks
  validation_split: 0.2
training:
  epochs: 1
  batch_size: 4
  seed: 3
  loss: binary_crossentropy
  optimizer: {type: Adam, learning_rate: 0.01}
  output_dir: )" + out_dir.string() + R"(
)";
}

// The first n sample images decoded as a Dataset holds them: [n, 42, 42, 3], 0..255.
Tensor sample_images(int n) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kSample + "/images")) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(int(files.size()) >= n);
  Tensor t(Shape{n, kSide, kSide, 3});
  for (int i = 0; i < n; ++i) decode_image(files[size_t(i)].string(), kSide, kSide, 3, t.sample(i));
  return t;
}

// NHWC [N, H, W, C] -> an OpenCV NCHW blob.
cv::Mat to_nchw(const Tensor& t) {
  const Shape s = t.shape();
  const int dims[] = {s.n, s.c, s.h, s.w};
  cv::Mat blob(4, dims, CV_32F);
  float* dst = blob.ptr<float>();
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c)
      for (int y = 0; y < s.h; ++y)
        for (int x = 0; x < s.w; ++x)
          dst[((size_t(n) * s.c + c) * s.h + y) * s.w + x] = t.data()[((size_t(n) * s.h + y) * s.w + x) * s.c + c];
  return blob;
}

}  // namespace

namespace {

/// Trains export_net (edited by `edit`) through the binary, exports it, and
/// returns OpenCV dnn's output on 3 sample images against Trainer::predict's:
/// the largest difference, and the smallest and largest expected probability.
struct OnnxMatch {
  double max_diff = 0, lo = 1, hi = 0;
};
OnnxMatch train_export_and_compare(const std::string& name, const std::function<void(std::string&)>& edit) {
  const fs::path dir = temp_dir(name);
  std::string yaml = export_net(dir / "run");
  edit(yaml);
  std::ofstream(dir / "net.yaml") << yaml;
  Run r = run_trainer("--config " + (dir / "net.yaml").string() + " --gpus cpu", dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const fs::path ckpt_path = dir / "run" / "final.h5", onnx_path = dir / "net.onnx";
  r = run_trainer("export --checkpoint " + ckpt_path.string() + " --output " + onnx_path.string(), dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("net.onnx") && Catch::Contains("[N, 3, 42, 42]"));
  for (const auto& e : fs::directory_iterator(dir))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);

  // What `trainer predict` computes: the checkpoint's config, a Trainer, its weights.
  const Checkpoint ckpt = load_checkpoint(ckpt_path.string());
  const Config config = parse_config(ckpt.config_yaml, ckpt_path.string());
  Trainer trainer(config, 1, 2);
  trainer.load_weights(ckpt.weights, ckpt_path.string());
  const int n = 3;
  const Tensor images = sample_images(n);
  const Tensor expected = trainer.predict(images, 2);
  REQUIRE(expected.shape().nhwc() == Shape{n, kSide, kSide, 1}.nhwc());

  cv::dnn::Net net = cv::dnn::readNetFromONNX(onnx_path.string());
  net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  net.setInput(to_nchw(images), "image");
  const cv::Mat got = net.forward("probability");
  REQUIRE(got.dims == 4);
  CHECK(got.size[0] == n);
  CHECK(got.size[1] == 1);
  CHECK(got.size[2] == kSide);
  CHECK(got.size[3] == kSide);
  REQUIRE(got.total() == expected.numel());

  // [N, 1, H, W] and [N, H, W, 1] share one memory order.
  const float* g = got.ptr<float>();
  OnnxMatch m;
  for (size_t i = 0; i < expected.numel(); ++i) {
    m.max_diff = std::max(m.max_diff, double(std::abs(g[i] - expected.data()[i])));
    m.lo = std::min(m.lo, double(expected.data()[i]));
    m.hi = std::max(m.hi, double(expected.data()[i]));
  }
  fs::remove_all(dir);
  return m;
}

}  // namespace

TEST_CASE("exported ONNX run by OpenCV dnn matches Trainer::predict", "[export]") {
  const OnnxMatch m = train_export_and_compare("export_match", [](std::string&) {});
  CHECK(m.max_diff <= 1e-4);
  CHECK(m.hi - m.lo > 1e-3);  // the outputs vary over the pixels: the comparison is not between constants
  CHECK(m.lo >= 0.0);         // probabilities: the sigmoid is part of the export
  CHECK(m.hi <= 1.0);
}

TEST_CASE("a model trained from_logits exports its loss's sigmoid: the output is probabilities", "[export][loss]") {
  const OnnxMatch m = train_export_and_compare("export_logits", [](std::string& yaml) {
    const std::string act = ", activation: sigmoid}", loss = "loss: binary_crossentropy";
    REQUIRE(yaml.rfind(act) != std::string::npos);
    yaml.replace(yaml.rfind(act), act.size(), "}");
    REQUIRE(yaml.find(loss) != std::string::npos);
    yaml.replace(yaml.find(loss), loss.size(), "loss: {type: BinaryCrossentropy, from_logits: true}");
  });
  CHECK(m.max_diff <= 1e-4);
  CHECK(m.hi - m.lo > 1e-3);
  CHECK(m.lo >= 0.0);
  CHECK(m.hi <= 1.0);
}

TEST_CASE("gelu exports as 0.5 x (1 + Erf(x / sqrt 2))", "[export]") {
  // OpenCV 4.6 reads no Erf, so the graph is checked node by node (ONNX's
  // checker passed it when it was written).
  const fs::path dir = temp_dir("export_gelu");
  const Config config = parse_config(R"(model:
  layers:
    - {name: input, type: Input, shape: [8, 8, 3]}
    - {name: g, type: Conv2D, filters: 2, kernel_size: 3, padding: same, activation: gelu}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data: {images: unused, masks: unused}
training: {epochs: 1}
)",
                                     "gelu.yaml");
  Trainer trainer(config, 1, 1);
  const std::string path = (dir / "gelu.onnx").string();
  export_onnx(Model(config.model, config.path), trainer.weights(), path);  // the model with its sigmoid, as export's
  onnx::ModelProto model;
  std::ifstream in(path, std::ios::binary);
  REQUIRE(model.ParseFromIstream(&in));
  CHECK(model.producer_name() == "trainer");
  CHECK(model.producer_version() == build_id());  // the build that wrote it
  std::map<std::string, float> scalars;
  for (const onnx::TensorProto& t : model.graph().initializer())
    if (t.float_data_size() == 1) scalars[t.name()] = t.float_data(0);
  std::vector<std::string> ops;
  std::map<std::string, const onnx::NodeProto*> by_output;
  for (const onnx::NodeProto& n : model.graph().node()) {
    ops.push_back(n.op_type());
    by_output[n.output(0)] = &n;
  }
  CHECK(ops == std::vector<std::string>{"Conv", "Div", "Erf", "Add", "Mul", "Mul", "Conv", "Sigmoid"});
  // Walk back from the gelu's output: Mul(Mul(z, Add(Erf(Div(z, sqrt 2)), 1)), 0.5), z the Conv's output.
  const onnx::NodeProto* half = by_output.at("g/output");
  REQUIRE(half->op_type() == "Mul");
  CHECK(scalars.at(half->input(1)) == 0.5f);
  const onnx::NodeProto* times = by_output.at(half->input(0));
  const std::string z = times->input(0);
  CHECK(by_output.at(z)->op_type() == "Conv");
  const onnx::NodeProto* plus = by_output.at(times->input(1));
  REQUIRE(plus->op_type() == "Add");
  CHECK(scalars.at(plus->input(1)) == 1.f);
  const onnx::NodeProto* erf = by_output.at(plus->input(0));
  REQUIRE(erf->op_type() == "Erf");
  const onnx::NodeProto* div = by_output.at(erf->input(0));
  REQUIRE(div->op_type() == "Div");
  CHECK(div->input(0) == z);
  CHECK(scalars.at(div->input(1)) == Approx(std::sqrt(2.0)).epsilon(1e-7));
  fs::remove_all(dir);
}

TEST_CASE("export: bad paths exit with 2 and a message naming the file", "[export]") {
  const fs::path dir = temp_dir("export_errors");
  Run r = run_trainer("export --checkpoint " + (dir / "missing.h5").string() + " --output " + (dir / "m.onnx").string(),
                      dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("missing.h5"));
  CHECK_FALSE(fs::exists(dir / "m.onnx"));

  std::ofstream(dir / "not_a_checkpoint.h5") << "hello";
  r = run_trainer(
      "export --checkpoint " + (dir / "not_a_checkpoint.h5").string() + " --output " + (dir / "m.onnx").string(), dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("not_a_checkpoint.h5"));

  r = run_trainer("export --output " + (dir / "m.onnx").string(), dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--checkpoint"));

  // A real checkpoint: train the smallest model for one epoch.
  std::ofstream(dir / "tiny.yaml") << R"(model:
  layers:
    - {name: input, type: Input, shape: [16, 16, 1]}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 3, padding: same, activation: sigmoid}
data: {images: )" + kSample + "/images, masks: " + kSample + R"(/masks}
training: {epochs: 1, batch_size: 8, loss: binary_crossentropy, output_dir: )" + (dir / "run").string() + "}\n";
  r = run_trainer("--config " + (dir / "tiny.yaml").string() + " --gpus cpu", dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::string ckpt = " --checkpoint " + (dir / "run" / "final.h5").string();

  r = run_trainer("export" + ckpt + " --output " + (dir / "no_such_folder" / "m.onnx").string(), dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("no_such_folder/m.onnx") && Catch::Contains("writable"));

  std::ofstream(dir / "a_file") << "x";
  r = run_trainer("export" + ckpt + " --output " + (dir / "a_file" / "m.onnx").string(), dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("a_file/m.onnx"));

  // --output naming a checkpoint (from fuzzing: the checkpoint itself was replaced by the ONNX file).
  const std::string before = slurp(dir / "run" / "final.h5");
  for (const char* victim : {"final.h5", "last.h5"}) {
    r = run_trainer("export" + ckpt + " --output " + (dir / "run" / victim).string(), dir);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains(std::string(victim) + "' is an HDF5 file (a checkpoint?) that would be "
                                      "replaced; export writes an ONNX file"));
  }
  CHECK(slurp(dir / "run" / "final.h5") == before);
  // --output naming another existing file, or a folder (the config and log.csv were replaced).
  const std::string config_text = slurp(dir / "tiny.yaml"), log = slurp(dir / "run" / "log.csv");
  for (const fs::path victim : {dir / "tiny.yaml", dir / "run" / "log.csv"}) {
    r = run_trainer("export" + ckpt + " --output " + victim.string(), dir);
    CHECK(r.code == 2);
    CHECK_THAT(r.err,
               Catch::Contains(victim.string() + "' exists, is not an earlier export and does not end in .onnx") &&
                   Catch::Contains("choose an --output ending in .onnx"));
  }
  CHECK(slurp(dir / "tiny.yaml") == config_text);
  CHECK(slurp(dir / "run" / "log.csv") == log);
  r = run_trainer("export" + ckpt + " --output " + (dir / "run").string(), dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err,
             Catch::Contains("is a folder; name the ONNX file to write, e.g. " + (dir / "run" / "unet.onnx").string()));

  r = run_trainer("export" + ckpt + " --output " + (dir / "tiny.onnx").string(), dir);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, !Catch::Contains("does not end in .onnx"));
  r = run_trainer("export" + ckpt + " --output " + (dir / "new.bin").string(), dir);  // a new file: written, with a word
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("does not end in .onnx; the file is ONNX whatever its name"));
  r = run_trainer("export" + ckpt + " --output " + (dir / "new.bin").string(), dir);  // an earlier export: replaced
  CHECK(r.code == 0);
  r = run_trainer("export" + ckpt + " --output " + (dir / "new.h5").string(), dir);  // taken for a checkpoint: refused
  CHECK(r.code == 2);
  CHECK_FALSE(std::filesystem::exists(dir / "new.h5"));
  r = run_trainer("export" + ckpt + " --output " + (dir / "M.ONNX").string(), dir);  // the extension in any case
  CHECK(r.code == 0);
  CHECK_THAT(r.err, !Catch::Contains("does not end in .onnx"));
  r = run_trainer("export" + ckpt + " --output " + (dir / "tiny.onnx").string(), dir);
  CHECK(r.code == 0);  // an earlier ONNX file is replaced
  CHECK(fs::file_size(dir / "tiny.onnx") > 0);
  fs::remove_all(dir);
}
