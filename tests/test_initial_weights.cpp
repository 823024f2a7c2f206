// training.initial_weights / --initial-weights (Keras's load_weights before
// fit), through the trainer binary on data/sample: a new run starts from a
// checkpoint's weights with a fresh optimizer; other models, missing files and
// --resume with it are user errors; a resumed run does not read it.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "io/checkpoint.h"
#include "process_testing.h"

namespace fs = std::filesystem;
using namespace trainer;
using trainer::testing::run_trainer;
using trainer::testing::sample_unet_config;
using trainer::testing::slurp;
using trainer::testing::temp_dir;

namespace {

// The sample U-Net with a BatchNormalization layer (momentum 0.99, Keras's default) after c2.
std::string config(const fs::path& out, const std::string& training) {
  std::string text = sample_unet_config(out, training);
  text.replace(text.find("    - {name: u1,"), 0, "    - {name: bn, type: BatchNormalization}\n");
  return text;
}

// The largest |a - b| over the trainable weights of two checkpoints of one model (BatchNormalization's moving
// statistics, which any training step moves, left out).
double max_weight_difference(const Checkpoint& a, const Checkpoint& b) {
  REQUIRE(a.weights.size() == b.weights.size());
  double worst = 0;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    const WeightRecord& x = a.weights[i];
    const WeightRecord& y = b.weights[i];
    REQUIRE(x.layer + "/" + x.name == y.layer + "/" + y.name);
    if (x.name.rfind("moving_", 0) == 0) continue;
    for (size_t j = 0; j < x.values.size(); ++j) worst = std::max(worst, double(std::abs(x.values[j] - y.values[j])));
  }
  return worst;
}

// The values of bn's weight `name` in c.
std::vector<float> bn_values(const Checkpoint& c, const std::string& name) {
  for (const WeightRecord& w : c.weights)
    if (w.layer == "bn" && w.name == name) return w.values;
  FAIL("no bn/" << name);
  return {};
}

}  // namespace

TEST_CASE("initial_weights starts a new run from a checkpoint's weights with a fresh optimizer", "[initial_weights]") {
  const fs::path dir = temp_dir("initial_weights");
  std::ofstream(dir / "a.yaml") << config(dir / "a", "  epochs: 2\n");
  REQUIRE(run_trainer("--config " + (dir / "a.yaml").string() + " --gpus cpu", dir).code == 0);
  // a's final weights with moving statistics no training step is near (one step moves them by 1% only).
  Checkpoint a = load_checkpoint((dir / "a" / "final.h5").string());
  for (WeightRecord& w : a.weights)
    if (w.layer == "bn" && w.name.rfind("moving_", 0) == 0)
      std::fill(w.values.begin(), w.values.end(), w.name == "moving_mean" ? 5.0f : 7.0f);
  const std::string pretrained = (dir / "pretrained.h5").string();
  save_checkpoint(pretrained, a);
  const double a_steps = load_checkpoint((dir / "a" / "last.h5").string()).state_scalars.at("optimizer_iterations");

  // Another seed (other initializers) and a learning rate too small to move the weights: a run from the
  // checkpoint's weights ends where they were, one that ignored them far away.
  auto slow = [&](const std::string& name, const std::string& training) {
    std::string text = config(dir / name, "  epochs: 1\n  seed: 7\n" + training);
    text.replace(text.find("  seed: 1\n"), 10, "");
    text.replace(text.find("learning_rate: 0.01"), 19, "learning_rate: 1e-9");
    std::ofstream(dir / (name + ".yaml")) << text;
    return "--config " + (dir / (name + ".yaml")).string() + " --gpus cpu";
  };
  const auto b_run = run_trainer(slow("b", "  initial_weights: " + pretrained + "\n"), dir);
  REQUIRE(b_run.code == 0);
  CHECK_THAT(b_run.err, Catch::Contains("initial weights from " + pretrained + " (saved after epoch 2 of its run)"));
  const Checkpoint b = load_checkpoint((dir / "b" / "final.h5").string());
  CHECK(b.epoch == 1);
  CHECK(max_weight_difference(a, b) < 1e-5);
  for (float m : bn_values(b, "moving_mean")) CHECK(std::abs(m - 5.0f) < 0.2f);  // 0.99 * 5 + 0.01 * batch mean
  for (float v : bn_values(b, "moving_variance")) CHECK(std::abs(v - 7.0f) < 0.2f);
  CHECK(slurp(dir / "b" / "log.csv").find("\n0,") != std::string::npos);  // the log starts at epoch 0
  REQUIRE(run_trainer(slow("c", ""), dir).code == 0);
  const Checkpoint c = load_checkpoint((dir / "c" / "final.h5").string());
  CHECK(max_weight_difference(a, c) > 1e-2);
  for (float m : bn_values(c, "moving_mean")) CHECK(std::abs(m - 5.0f) > 1.0f);

  // The flag, from last.h5 (which holds a's optimizer state): the weights are taken, the optimizer starts
  // afresh (one epoch's steps, not three), and the checkpoint's stored config records the flag.
  const std::string a_last = (dir / "a" / "last.h5").string();
  REQUIRE(run_trainer(slow("d", "") + " --initial-weights " + a_last, dir).code == 0);
  CHECK(max_weight_difference(a, load_checkpoint((dir / "d" / "final.h5").string())) < 1e-5);
  const Checkpoint d_last = load_checkpoint((dir / "d" / "last.h5").string());
  CHECK(d_last.state_scalars.at("optimizer_iterations") * 2 == a_steps);
  CHECK_THAT(d_last.config_yaml, Catch::Contains("initial_weights: " + a_last));

  // A resumed run (its config still naming initial_weights) takes the checkpoint's weights, not those.
  const auto resumed = run_trainer(slow("b", "  initial_weights: " + pretrained + "\n") + " --epochs 2 --resume " +
                                       (dir / "b" / "last.h5").string(),
                                   dir);
  CHECK(resumed.code == 0);
  CHECK_THAT(resumed.err, Catch::Contains("training.initial_weights (" + pretrained + ") is not read") &&
                              !Catch::Contains("initial weights from"));
  fs::remove_all(dir);
}

TEST_CASE("initial_weights with skip_mismatch keeps the layers that do not fit at their initializers",
          "[initial_weights]") {
  const fs::path dir = temp_dir("initial_weights_skip");
  std::ofstream(dir / "a.yaml") << config(dir / "a", "  epochs: 1\n");
  REQUIRE(run_trainer("--config " + (dir / "a.yaml").string() + " --gpus cpu", dir).code == 0);
  Checkpoint a = load_checkpoint((dir / "a" / "final.h5").string());
  for (WeightRecord& w : a.weights)  // moving statistics no training step is near, as above
    if (w.layer == "bn" && w.name.rfind("moving_", 0) == 0)
      std::fill(w.values.begin(), w.values.end(), w.name == "moving_mean" ? 5.0f : 7.0f);
  const std::string pretrained = (dir / "pretrained.h5").string();
  save_checkpoint(pretrained, a);
  // A new output layer (a 3x3 kernel where a's is 1x1) and c3 without its bias, trained at a learning rate too
  // small to move any weight.
  auto head = [&](const std::string& name, const std::string& initial_weights) {
    std::string text = config(dir / name, "  epochs: 1\n  initial_weights: " + initial_weights + "\n");
    text.replace(text.find("filters: 1, kernel_size: 1"), 26, "filters: 1, kernel_size: 3, padding: same");
    text.replace(text.find("{name: c3, type: Conv2D,"), 24, "{name: c3, type: Conv2D, use_bias: false,");
    text.replace(text.find("learning_rate: 0.01"), 19, "learning_rate: 1e-9");
    std::ofstream(dir / (name + ".yaml")) << text;
    return run_trainer("--config " + (dir / (name + ".yaml")).string() + " --gpus cpu --seed 7", dir);
  };
  const auto r = head("b", "{filepath: " + pretrained + ", skip_mismatch: true, by_name: true}");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("training.initial_weights: skip_mismatch: layer out ('out/kernel' is "
                                    "[1, 1, 8, 1] there, [3, 3, 8, 1] in the model) keeps its initial weights") &&
                        Catch::Contains("skip_mismatch: layer c3 (it has 2 weight(s) there, 1 in the model) keeps "
                                        "its initial weights"));
  const Checkpoint b = load_checkpoint((dir / "b" / "final.h5").string());
  std::map<std::string, const WeightRecord*> b_weights;
  for (const WeightRecord& w : b.weights) b_weights[w.layer + "/" + w.name] = &w;
  for (const WeightRecord& x : a.weights) {
    INFO(x.layer << "/" << x.name);
    if (x.layer == "out" || x.layer == "c3") continue;
    const WeightRecord& y = *b_weights.at(x.layer + "/" + x.name);
    const double tolerance = x.name.rfind("moving_", 0) == 0 ? 0.2 : 1e-5;  // one step moves the statistics 1%
    double worst = 0;
    for (size_t j = 0; j < x.values.size(); ++j) worst = std::max(worst, double(std::abs(x.values[j] - y.values[j])));
    CHECK(worst < tolerance);
  }
  // The kept layers hold their initializers' values: zeros for out's bias, c3's kernel far from a's.
  for (float v : b_weights.at("out/bias")->values) CHECK(std::abs(v) < 1e-6);
  double c3_difference = 0;
  for (const WeightRecord& x : a.weights)
    if (x.layer == "c3" && x.name == "kernel")
      for (size_t j = 0; j < x.values.size(); ++j)
        c3_difference = std::max(c3_difference, double(std::abs(x.values[j] - b_weights.at("c3/kernel")->values[j])));
  CHECK(c3_difference > 1e-2);
  // --initial-weights replaces the mapping's filepath only: skip_mismatch stays, in the stored config too.
  fs::copy_file(pretrained, dir / "copy.h5");
  const auto e = run_trainer("--config " + (dir / "b.yaml").string() + " --gpus cpu --output " + (dir / "e").string() +
                                 " --initial-weights " + (dir / "copy.h5").string(),
                             dir);
  REQUIRE(e.code == 0);
  CHECK_THAT(e.err, Catch::Contains("initial weights from " + (dir / "copy.h5").string()) &&
                        Catch::Contains("layer out ('out/kernel'"));
  const std::string stored = load_checkpoint((dir / "e" / "last.h5").string()).config_yaml;
  CHECK_THAT(stored, Catch::Contains("filepath: " + (dir / "copy.h5").string()) &&
                         Catch::Contains("skip_mismatch: true"));
  // Without skip_mismatch the same model is refused, naming the key that allows it.
  const auto strict = head("c", pretrained);
  CHECK(strict.code == 2);
  CHECK_THAT(strict.err, Catch::Contains("write initial_weights: {filepath: " + pretrained + ", skip_mismatch: true}"));
  // A checkpoint none of whose layers fits is another model, skip_mismatch or not.
  Checkpoint other = a;
  for (WeightRecord& w : other.weights) w.layer = "x_" + w.layer;
  save_checkpoint((dir / "other.h5").string(), other);
  const auto none = head("d", "{filepath: " + (dir / "other.h5").string() + ", skip_mismatch: true}");
  CHECK(none.code == 2);
  CHECK_THAT(none.err, Catch::Contains("none of the model's layers with weights fits the checkpoint's (c1 (no "
                                       "'c1/kernel' there)); it was written for another model"));
  fs::remove_all(dir);
}

TEST_CASE("initial_weights of another model, a missing file or beside --resume is a user error", "[initial_weights]") {
  const fs::path dir = temp_dir("initial_weights_errors");
  std::ofstream(dir / "a.yaml") << config(dir / "a", "  epochs: 1\n");
  REQUIRE(run_trainer("--config " + (dir / "a.yaml").string() + " --gpus cpu", dir).code == 0);
  const std::string pretrained = (dir / "a" / "final.h5").string();

  // Three classes out of the 1-channel model: the output layer's kernel is of another shape.
  std::string three = config(dir / "b", "  epochs: 1\n  loss: sparse_categorical_crossentropy\n"
                                                    "  initial_weights: " + pretrained + "\n");
  three.replace(three.find("filters: 1, kernel_size: 1, activation: sigmoid"), 47,
                "filters: 3, kernel_size: 1, activation: softmax");
  std::ofstream(dir / "b.yaml") << three;
  auto r = run_trainer("--config " + (dir / "b.yaml").string() + " --gpus cpu", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("b.yaml:") && Catch::Contains(": training.initial_weights " + pretrained +
                                                                  ": 'out/kernel' is [1, 1, 8, 1] there, "
                                                                  "[1, 1, 8, 3] in the model") &&
                        Catch::Contains("write initial_weights: {filepath: " + pretrained + ", skip_mismatch: true}"));
  CHECK_FALSE(fs::exists(dir / "b" / "last.h5"));

  r = run_trainer("--config " + (dir / "a.yaml").string() + " --gpus cpu --output " + (dir / "e").string() +
                      " --initial-weights " + (dir / "nowhere.h5").string(),
                  dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("error: --initial-weights: ") && Catch::Contains("nowhere.h5"));

  r = run_trainer("--config " + (dir / "a.yaml").string() + " --gpus cpu --resume " + (dir / "a" / "last.h5").string() +
                      " --initial-weights " + pretrained,
                  dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--initial-weights starts a new run from a checkpoint's weights, --resume "
                                    "continues the run"));

  // From the output folder, whose checkpoints the run replaces (a user's --overwrite lost the pretrained
  // final.h5 so): refused, nothing written.
  const std::string before = slurp(pretrained);
  r = run_trainer("--config " + (dir / "a.yaml").string() + " --gpus cpu --overwrite --initial-weights " + pretrained,
                  dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--initial-weights: '" + pretrained + "' lies in the output folder '" +
                                    (dir / "a").string() + "', where this run writes its checkpoints"));
  CHECK(slurp(pretrained) == before);
  // The run folder itself: the files in it are listed.
  r = run_trainer("--config " + (dir / "a.yaml").string() + " --gpus cpu --overwrite --initial-weights " +
                      (dir / "a").string(),
                  dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("it is a folder; give the path of a .h5 file written by trainer, one of: " +
                                    (dir / "a" / "last.h5").string()));
  std::ofstream(dir / "empty.yaml") << sample_unet_config(dir / "e", "  initial_weights: ''\n");
  r = run_trainer("--config " + (dir / "empty.yaml").string() + " --gpus cpu", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("training: 'initial_weights' must not be empty"));
  std::ofstream(dir / "keras.yaml") << sample_unet_config(dir / "e", "  load_weights: " + pretrained + "\n");
  r = run_trainer("--config " + (dir / "keras.yaml").string() + " --gpus cpu", dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown key 'load_weights' (did you mean 'initial_weights'?)"));
  fs::remove_all(dir);
}
