// trainer import against real Keras: tests/keras/make_models.py builds the
// seed notebook's U-Net in Keras 3 (and tf_keras, Keras 2, where installed)
// and saves it as users do; each file imports, the imported weights predict
// what Keras predicts, the imported config trains, and a model with layers
// trainer lacks is refused with all of them named. Keras comes from the
// Python that TRAINER_KERAS_PYTHON names (.ci/run makes a venv with it);
// without it the test says so and checks nothing.
#include <catch2/catch.hpp>

#include <opencv2/imgcodecs.hpp>

#include <cstdlib>
#include <fstream>

#include "process_testing.h"

using namespace trainer::testing;
namespace fs = std::filesystem;

namespace {

/// Keras's probabilities for test.png, written by make_models.py: float32 [64, 64].
cv::Mat keras_probabilities(const fs::path& dir) {
  cv::Mat p(64, 64, CV_32F);
  std::ifstream in(dir / "keras_prob.bin", std::ios::binary);
  in.read(reinterpret_cast<char*>(p.data), std::streamsize(p.total() * sizeof(float)));
  REQUIRE(in.gcount() == std::streamsize(p.total() * sizeof(float)));
  return p;
}

/// The largest difference between trainer's probabilities from the weights imported from model and Keras's.
double predicted_difference(const fs::path& dir, const std::string& model) {
  const std::string stem = fs::path(model).stem().string() + "_" + fs::path(model).extension().string().substr(1);
  const fs::path config = dir / (stem + ".yaml"), weights = dir / (stem + ".weights.h5");
  Run r = run_trainer("import " + (dir / model).string() + " --output " + config.string(), dir);
  INFO(model << ": " << r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("layer 'lambda' (Lambda): computes x * 0.00392156862745098, imported as Rescaling") !=
        std::string::npos);
  const fs::path out = dir / ("predicted_" + stem);
  r = run_trainer("predict --checkpoint " + weights.string() + " --input " + (dir / "test.png").string() +
                      " --output " + out.string() + " --probabilities --probability-format tiff",
                  dir);
  REQUIRE(r.code == 0);
  const cv::Mat ours = cv::imread((out / "test_prob.tif").string(), cv::IMREAD_UNCHANGED);
  REQUIRE(ours.type() == CV_32F);
  return cv::norm(ours, keras_probabilities(dir), cv::NORM_INF);
}

}  // namespace

TEST_CASE("Keras models saved as .keras, .h5 and JSON import, predict as in Keras, and train", "[keras][e2e]") {
  const char* env = std::getenv("TRAINER_KERAS_PYTHON");
  const std::string python = env && *env ? env : "python3";
  const fs::path dir = temp_dir("keras_roundtrip");
  if (run(python, "-c 'import keras, tensorflow'", fresh_subdir(dir, "probe")).code != 0) {
    WARN("not checked against Keras: " << python << " has no keras and tensorflow (set TRAINER_KERAS_PYTHON to a "
                                          "Python that has them; .ci/run makes one)");
    return;
  }
  const std::string source = TRAINER_SOURCE_DIR;
  const std::string sample = source + "/data/sample/images/00071198d059ba7f5914a526d124d28e6d010c92466da21d4a04cd5413362552.png";
  Run made = run(python, source + "/tests/keras/make_models.py " + dir.string() + " " + sample, dir);
  INFO(made.out << made.err);
  REQUIRE(made.code == 0);

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
  CHECK_FALSE(fs::exists(dir / "seed_json.weights.h5"));

  // The imported config trains from the imported weights.
  r = run_trainer("--config " + (dir / "seed_keras.yaml").string() + " --images " + source + "/data/sample/images --masks " +
                      source + "/data/sample/masks --epochs 1 --output " + (dir / "run").string() + " --gpus cpu",
                  dir);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(fs::exists(dir / "run" / "final.h5"));

  r = run_trainer("import " + (dir / "unsupported.keras").string() + " --output " + (dir / "u.yaml").string(), dir);
  INFO(r.err);
  CHECK(r.code == 2);
  for (const char* named : {"(Lambda): its function is not x * scale + offset", "unknown key 'kernel_constraint'",
                            "(Conv3D): trainer has no Conv3D layer"})
    CHECK(r.err.find(named) != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "u.yaml"));
}
