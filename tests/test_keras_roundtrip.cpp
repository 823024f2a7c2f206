// trainer import and export --format keras against real Keras:
// tests/keras/make_models.py builds the seed notebook's U-Net in Keras 3 (and
// tf_keras, Keras 2, where installed) and saves it as users do; each file
// imports, the imported weights predict what Keras predicts, the imported
// config trains, the trained model exported as .keras opens in Keras and
// predicts what trainer predicts (tests/keras/keras_predict.py), and a model
// with layers trainer lacks is refused with all of them named. A model of
// every layer type goes out to Keras and back in. Keras comes from the
// Python that TRAINER_KERAS_PYTHON names (.ci/run makes a venv with it);
// without it the test says so and checks nothing.
#include <catch2/catch.hpp>

#include <opencv2/imgcodecs.hpp>

#include <fstream>

#include "process_testing.h"

using namespace trainer::testing;
namespace fs = std::filesystem;

namespace {

/// Keras's probabilities written by make_models.py or keras_predict.py: float32 [size, size].
cv::Mat keras_probabilities(const fs::path& file, int size = 64) {
  cv::Mat p(size, size, CV_32F);
  std::ifstream in(file, std::ios::binary);
  in.read(reinterpret_cast<char*>(p.data), std::streamsize(p.total() * sizeof(float)));
  REQUIRE(in.gcount() == std::streamsize(p.total() * sizeof(float)));
  return p;
}

/// trainer's probabilities for image from checkpoint (float32, the image's size).
cv::Mat trainer_probabilities(const fs::path& dir, const fs::path& checkpoint, const std::string& image) {
  const fs::path out = fresh_subdir(dir, "predicted");
  const Run r = run_trainer("predict --checkpoint " + checkpoint.string() + " --input " + (dir / image).string() +
                                " --output " + out.string() + " --probabilities --probability-format tiff",
                            dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const cv::Mat p = cv::imread((out / (fs::path(image).stem().string() + "_prob.tif")).string(), cv::IMREAD_UNCHANGED);
  REQUIRE(p.type() == CV_32F);
  return p;
}

/// Imports model (a file in dir) to <stem>_<ext>.yaml and _weights.h5; returns the weights file.
fs::path import_model(const fs::path& dir, const std::string& model) {
  const std::string stem = fs::path(model).stem().string() + "_" + fs::path(model).extension().string().substr(1);
  const Run r = run_trainer("import " + (dir / model).string() + " --output " + (dir / (stem + ".yaml")).string(), dir);
  INFO(model << ": " << r.out << r.err);
  REQUIRE(r.code == 0);
  return dir / (stem + "_weights.h5");
}

/// The largest difference between trainer's probabilities from the weights imported from model and Keras's.
double predicted_difference(const fs::path& dir, const std::string& model) {
  const fs::path weights = import_model(dir, model);
  return cv::norm(trainer_probabilities(dir, weights, "test.png"), keras_probabilities(dir / "keras_prob.bin"),
                  cv::NORM_INF);
}

/// Exports checkpoint as .keras, opens it in Keras (keras_predict.py, which saves it again as resaved.keras
/// and resaved.h5 with resaved) and returns the largest difference of Keras's probabilities for image from
/// trainer's.
double exported_difference(const std::string& python, const fs::path& dir, const fs::path& checkpoint,
                           const std::string& image, int size, const std::string& resaved = "") {
  const fs::path keras = dir / (checkpoint.stem().string() + ".keras");
  Run r = run_trainer("export --checkpoint " + checkpoint.string() + " --format keras --output " + keras.string(), dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const fs::path bin = dir / "exported_prob.bin";
  r = run(python, std::string(TRAINER_SOURCE_DIR) + "/tests/keras/keras_predict.py " + keras.string() + " " +
                      (dir / image).string() + " " + bin.string() +
                      (resaved.empty() ? "" : " " + (dir / resaved).string()),
          fresh_subdir(dir, "keras_predict"));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  return cv::norm(trainer_probabilities(dir, checkpoint, image), keras_probabilities(bin, size), cv::NORM_INF);
}

/// A model of every layer type trainer has, as Keras would name their arguments.
const char* kEveryLayer = R"(model:
  name: every_layer
  layers:
    - {type: Input, name: image, shape: [32, 32, 3]}
    - {type: Rescaling, name: scale, scale: 0.00392156862745098, offset: -0.5}
    - {type: Conv2D, name: c1, filters: 8, kernel_size: 3, padding: same, activation: relu, kernel_regularizer: {type: L2, l2: 0.0001}}
    - {type: BatchNormalization, name: bn1}
    - {type: SeparableConv2D, name: sep, filters: 8, kernel_size: 3, padding: same}
    - {type: DepthwiseConv2D, name: dw, kernel_size: 3, padding: same}
    - {type: LeakyReLU, name: lrelu}
    - {type: AveragePooling2D, name: avg, pool_size: 2}
    - {type: ZeroPadding2D, name: zpad, padding: 1}
    - {type: Cropping2D, name: crop, cropping: 1}
    - {type: GroupNormalization, name: gn, groups: 4}
    - {type: ELU, name: elu}
    - {type: Conv2D, name: c2, filters: 8, kernel_size: 3, padding: same, dilation_rate: 2, use_bias: no}
    - {type: PReLU, name: prelu, shared_axes: [1, 2]}
    - {type: Add, name: add, inputs: [prelu, gn]}
    - {type: GlobalAveragePooling2D, name: gap}
    - {type: Dense, name: fc, units: 8, activation: sigmoid}
    - {type: Reshape, name: rs, target_shape: [1, 1, 8]}
    - {type: Multiply, name: se, inputs: [add, rs]}
    - {type: GlobalMaxPooling2D, name: gmp, keepdims: true, inputs: se}
    - {type: Multiply, name: gate, inputs: [se, gmp]}
    - {type: LayerNormalization, name: ln}
    - {type: SpatialDropout2D, name: sd, rate: 0.1}
    - {type: Dropout, name: drop, rate: 0.1}
    - {type: UpSampling2D, name: up, size: 2, interpolation: bilinear}
    - {type: Concatenate, name: cat, inputs: [up, bn1]}
    - {type: ReLU, name: relu}
    - {type: Conv2DTranspose, name: ct, filters: 4, kernel_size: 3, padding: same}
    - {type: MaxPooling2D, name: mp, pool_size: 3, strides: 1, padding: same}
    - {type: Activation, name: act, activation: tanh}
    - {type: Conv2D, name: out, filters: 1, kernel_size: 1, activation: sigmoid}
data: {images: images, masks: masks}
training:
  epochs: 1
  batch_size: 8
  loss: binary_crossentropy
  optimizer: {type: Adam, learning_rate: 0.01}
)";

/// The Python that TRAINER_KERAS_PYTHON names (else python3), after make_models.py has written its files to
/// dir; "" (with a warning) when that Python has no Keras.
std::string keras_models(const fs::path& dir) {
  const std::string python = keras_python(dir);
  if (python.empty()) {
    WARN("not checked against Keras: no Python with keras and tensorflow (set TRAINER_KERAS_PYTHON to one; "
         ".ci/run makes it)");
    return "";
  }
  const std::string source = TRAINER_SOURCE_DIR;
  const std::string sample = source + "/data/sample/images/00071198d059ba7f5914a526d124d28e6d010c92466da21d4a04cd5413362552.png";
  const Run made = run(python, source + "/tests/keras/make_models.py " + dir.string() + " " + sample, dir);
  INFO(made.out << made.err);
  REQUIRE(made.code == 0);
  return python;
}

/// trainer trains config for its epochs (or `epochs`) on data/sample into dir/run.
void train_on_sample(const fs::path& dir, const fs::path& config, const std::string& epochs = "") {
  const std::string sample = std::string(TRAINER_SOURCE_DIR) + "/data/sample";
  const Run r = run_trainer("--config " + config.string() + " --images " + sample + "/images --masks " + sample +
                                "/masks " + epochs + " --output " + (dir / "run").string() + " --gpus cpu",
                            dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
}

}  // namespace

TEST_CASE("Keras models saved as .keras, .h5 and JSON import, predict as in Keras, and train", "[keras][e2e]") {
  const fs::path dir = temp_dir("keras_roundtrip");
  const std::string python = keras_models(dir);
  if (python.empty()) return;

  // The float32 arithmetic differs in order only (x / 255 against x * (1 / 255), the convolutions' sums).
  CHECK(predicted_difference(dir, "seed.keras") < 1e-5);
  CHECK(predicted_difference(dir, "seed.h5") < 1e-5);
  if (fs::exists(dir / "seed_tf2.h5")) CHECK(predicted_difference(dir, "seed_tf2.h5") < 1e-5);
  else WARN("tf_keras is not installed: the Keras 2 .h5 model was not checked");

  // The JSON holds the model alone: the same config, no weights.
  Run r = run_trainer("import " + (dir / "seed.json").string() + " --output " + (dir / "seed_json.yaml").string(), dir);
  REQUIRE(r.code == 0);
  const auto model_section = [](const std::string& text) { return text.substr(text.find("model:"), text.find("data:") - text.find("model:")); };
  CHECK(model_section(slurp(dir / "seed_json.yaml")) == model_section(slurp(dir / "seed_keras.yaml")));
  CHECK_FALSE(fs::exists(dir / "seed_json_weights.h5"));

  // The imported config trains from the imported weights; the trained model goes back to Keras.
  train_on_sample(dir, dir / "seed_keras.yaml", "--epochs 1");
  CHECK(exported_difference(python, dir, dir / "run" / "final.h5", "test.png", 64) < 1e-5);

  r = run_trainer("import " + (dir / "unsupported.keras").string() + " --output " + (dir / "u.yaml").string(), dir);
  INFO(r.err);
  CHECK(r.code == 2);
  for (const char* named : {"(Lambda): its function is not x * scale + offset", "unknown key 'kernel_constraint'",
                            "(Conv3D): trainer has no Conv3D layer"})
    CHECK(r.err.find(named) != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "u.yaml"));
}

TEST_CASE("a model of every layer type goes to Keras as .keras and comes back through import", "[keras][e2e]") {
  const fs::path dir = temp_dir("keras_every_layer");
  const std::string python = keras_models(dir);
  if (python.empty()) return;
  std::ofstream(dir / "every.yaml") << kEveryLayer;
  train_on_sample(dir, dir / "every.yaml");
  CHECK(exported_difference(python, dir, dir / "run" / "final.h5", "test32.png", 32, "resaved") < 1e-5);
  // Saved again by Keras, whose weights file names layers by class and place: the same predictions.
  const cv::Mat ours = trainer_probabilities(dir, dir / "run" / "final.h5", "test32.png");
  for (const char* resaved : {"resaved.keras", "resaved.h5"})
    CHECK(cv::norm(trainer_probabilities(dir, import_model(dir, resaved), "test32.png"), ours, cv::NORM_INF) == 0);
}
