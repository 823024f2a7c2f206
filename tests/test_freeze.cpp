// Keras's `trainable: false` (layer.trainable = False): a frozen layer's
// weights get no gradient, no update and no regularizer penalty, a frozen
// BatchNormalization computes with (and keeps) its moving statistics, the
// summary counts frozen weights as non-trainable, towers agree, a resume
// that freezes or unfreezes a layer is refused, and the trainer binary
// fine-tunes a pretrained model with its encoder frozen.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "config/config.h"
#include "io/checkpoint.h"
#include "nn/model.h"
#include "process_testing.h"
#include "tiny_model.h"
#include "train/resume_check.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace trainer;
using trainer::testing::run_trainer;
using trainer::testing::sample_unet_config;
using trainer::testing::tiny_config;
using trainer::testing::tiny_data;
using trainer::testing::tiny_frozen_config;

namespace {

/// text with `trainable: false` added to the one-line layer entry named `layer`.
std::string freeze(std::string text, const std::string& layer) {
  const size_t at = text.find("{name: " + layer + ",");
  REQUIRE(at != std::string::npos);
  text.insert(text.find('}', at), ", trainable: false");
  return text;
}

/// Weight values by "layer/name".
std::map<std::string, std::vector<float>> by_name(const std::vector<WeightRecord>& weights) {
  std::map<std::string, std::vector<float>> out;
  for (const WeightRecord& w : weights) out[w.layer + "/" + w.name] = w.values;
  return out;
}

bool is_frozen_layer(const std::string& weight) {
  for (const char* l : {"bn1/", "c2/", "a2/", "s2/", "u1/", "gn/", "ln/"})
    if (weight.rfind(l, 0) == 0) return true;
  return false;
}

const std::vector<std::vector<int>> kBatches = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}, {3, 9}};

}  // namespace

TEST_CASE("trainable: false makes a layer's weights non-trainable, as Keras's summary counts them", "[freeze]") {
  const Config plain = parse_config(tiny_config(false), "tiny.yaml");
  const Model all(plain.model, plain.path);
  // c1 112, bn1 gamma + beta 8, c2 296, u1 132, out 9; bn1's moving statistics 8.
  CHECK(all.num_params() == 557);
  CHECK(all.num_state() == 8);

  const Config config = parse_config(freeze(freeze(tiny_config(false), "c1"), "bn1"), "tiny.yaml");
  CHECK_FALSE(config.model.layers[2].trainable);
  CHECK(config.model.layers[4].trainable);
  const Model m(config.model, config.path);
  CHECK(m.num_params() == 557 - 112 - 8);
  CHECK(m.num_state() == 8 + 112 + 8);
  CHECK(m.num_frozen() == 112 + 16);
  CHECK(all.num_frozen() == 0);
  for (const WeightSlot& w : m.weights()) {
    const std::string layer = m.layer(w.layer).name();
    INFO(layer << "/" << w.spec.name);
    CHECK(w.spec.trainable == (layer != "c1" && layer != "bn1"));
  }
  // No gradient reaches c1's input, bn1 or c1: nothing before them trains.
  CHECK_FALSE(m.needs_gradient(2));
  CHECK_FALSE(m.needs_gradient(3));
  CHECK(m.needs_gradient(5));
  CHECK_THAT(m.summary(), Catch::Contains("Total params: 565") && Catch::Contains("Trainable params: 437") &&
                              Catch::Contains("Non-trainable params: 128"));
}

TEST_CASE("trainable must be a boolean, not on the Input, and some weight must train", "[freeze]") {
  auto error = [](const std::string& text) -> std::string {
    try {
      const Config c = parse_config(text, "tiny.yaml");
      Model m(c.model, c.path);
      validate_for_training(c, m);
    } catch (const UserError& e) {
      return e.what();
    }
    return "accepted";
  };
  std::string text = tiny_config(false);
  text.replace(text.find("{name: c1,"), 10, "{name: c1, trainable: maybe,");
  CHECK_THAT(error(text), Catch::Contains("tiny.yaml:7:") && Catch::Contains("trainable") &&
                              Catch::Contains("true or false"));
  CHECK_THAT(error(freeze(tiny_config(false), "in")),
             Catch::Contains("is false on the Input layer, which has no weights"));
  // Keras trains such a model silently (no step changes anything); here it is a config mistake.
  std::string all = tiny_config(false);
  for (const char* l : {"c1", "bn1", "c2", "u1", "out"}) all = freeze(all, l);
  CHECK(error(all) == "tiny.yaml: the model has no trainable weights, so training would change nothing "
                      "(trainable: false on 'c1', 'bn1', 'c2', 'u1', 'out'); set trainable: true (or leave the "
                      "key out) on the layers to train");
  CHECK(error(freeze(tiny_config(false), "drop")) == "accepted");  // no weights: nothing to freeze, as Keras
}

TEST_CASE("a frozen layer's regularizer adds no penalty, as Keras 3 counts trainable weights only", "[freeze]") {
  std::string text = tiny_config(false);
  text.replace(text.find("{name: c2,"), 10, "{name: c2, kernel_regularizer: l2,");
  const Config trained = parse_config(text, "tiny.yaml");
  CHECK(Trainer(trained, 1, 1).regularized_weights() == 1);
  const Config frozen = parse_config(freeze(text, "c2"), "tiny.yaml");
  CHECK(Trainer(frozen, 1, 1).regularized_weights() == 0);
}

TEST_CASE("frozen layers keep their weights while the gradient passes through them to the layers that train",
          "[freeze]") {
  const Dataset data = tiny_data();
  // One step: the frozen layers compute as the trained ones do, so c1 and out, which train in both, take
  // the same step with the layers between them frozen as without (their dx is the same without the
  // weight gradients), bit for bit.
  const Config open = parse_config(tiny_frozen_config(false), "open.yaml");
  const Config frozen = parse_config(tiny_frozen_config(true), "frozen.yaml");
  Trainer a(open, 1, 1), b(frozen, 1, 1);
  const auto start = by_name(b.weights());
  REQUIRE(by_name(a.weights()) == start);  // the same initial weights: slots are seeded by position
  const std::vector<float> state0 = b.state(0);
  a.train_step(data, kBatches[0]);
  b.train_step(data, kBatches[0]);
  const auto after_a = by_name(a.weights()), after_b = by_name(b.weights());
  for (const auto& [name, values] : after_b) {
    INFO(name);
    if (is_frozen_layer(name)) {
      CHECK(values == start.at(name));
      if (name.rfind("bn1/", 0) != 0) CHECK(after_a.at(name) != start.at(name));  // they train in `open`
    } else {
      CHECK(values != start.at(name));
      CHECK(values == after_a.at(name));
    }
  }
  // More steps: frozen weights and the frozen BatchNormalization's moving statistics keep their bits.
  for (size_t i = 1; i < kBatches.size(); ++i) b.train_step(data, kBatches[i]);
  CHECK(b.state(0) == state0);
  for (const auto& [name, values] : by_name(b.weights()))
    if (is_frozen_layer(name)) CHECK(values == start.at(name));
}

TEST_CASE("N CPU towers with frozen layers reach the weights of one tower", "[freeze][towers]") {
  // bn1 is synchronized and frozen: it calls no collective, on towers with samples or without.
  trainer::testing::check_towers_reach_one_tower(parse_config(tiny_frozen_config(true), "frozen.yaml"));
}

TEST_CASE("resuming with a layer frozen or unfrozen is refused, and the same setting resumes", "[freeze][resume]") {
  const Config then = parse_config(freeze(tiny_config(false), "c1"), "tiny.yaml");
  const Config unfrozen = parse_config(tiny_config(false), "tiny.yaml");
  try {
    resume_differences(unfrozen, then, "run/last.h5");
    FAIL("a changed trainable was accepted");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()) ==
          "run/last.h5 was trained with layer 'c1' trainable: false, the config says true; the optimizer's state "
          "covers the trainable weights only and cannot carry over: set it back to false to resume, or start a new "
          "run from the checkpoint's weights with --initial-weights run/last.h5 and another --output (Keras's "
          "load_weights before fit)");
  }
  CHECK_THROWS_WITH(resume_differences(then, unfrozen, "run/last.h5"),
                    Catch::Contains("layer 'c1' trainable: true, the config says false"));
  // The default written out is no difference.
  std::string explicit_true = tiny_config(false);
  explicit_true.replace(explicit_true.find("{name: c2,"), 10, "{name: c2, trainable: true,");
  CHECK(resume_differences(parse_config(explicit_true, "tiny.yaml"), unfrozen, "run/last.h5").empty());
  CHECK(resume_differences(then, then, "run/last.h5").empty());
}

TEST_CASE("the trainer fine-tunes a pretrained model with its encoder frozen, and resumes such a run",
          "[freeze][initial_weights]") {
  const trainer::testing::TempDir tmp("freeze_e2e");
  const fs::path dir = tmp.root;
  std::ofstream(dir / "a.yaml") << sample_unet_config(dir / "a", "  epochs: 2\n");
  REQUIRE(run_trainer("--config " + (dir / "a.yaml").string() + " --gpus cpu", dir).code == 0);
  const std::string pretrained = (dir / "a" / "final.h5").string();
  const auto start = by_name(load_checkpoint(pretrained).weights);

  // The encoder (c1, c2) frozen, the decoder trained from the pretrained weights.
  std::ofstream(dir / "b.yaml") << freeze(freeze(sample_unet_config(dir / "b", "  epochs: 2\n"), "c1"), "c2");
  const std::string b_args = "--config " + (dir / "b.yaml").string() + " --gpus cpu";
  const auto b_run = run_trainer(b_args + " --initial-weights " + pretrained, dir);
  REQUIRE(b_run.code == 0);
  // c1 224 + c2 1,168 frozen of 3,081.
  CHECK_THAT(b_run.out, Catch::Contains("Trainable params: 1,689") && Catch::Contains("Non-trainable params: 1,392"));
  CHECK_THAT(b_run.err, Catch::Contains("frozen layers (trainable: false), their 1392 weight values kept as they "
                                        "are: c1, c2"));
  const auto tuned = by_name(load_checkpoint((dir / "b" / "final.h5").string()).weights);
  for (const auto& [name, values] : tuned) {
    INFO(name);
    if (name.rfind("c1/", 0) == 0 || name.rfind("c2/", 0) == 0)
      CHECK(values == start.at(name));
    else
      CHECK(values != start.at(name));
  }

  // skip_mismatch leaving a frozen layer at its initializer says it stays so.
  std::string head = freeze(sample_unet_config(dir / "d", "  epochs: 1\n  initial_weights: {filepath: " + pretrained +
                                                               ", skip_mismatch: true}\n"),
                            "out");
  head.replace(head.find("{name: out,"), 11, "{name: head,");
  std::ofstream(dir / "d.yaml") << head;
  const auto d_run = run_trainer("--config " + (dir / "d.yaml").string() + " --gpus cpu", dir);
  CHECK(d_run.code == 0);
  CHECK_THAT(d_run.err, Catch::Contains("layer head (no 'head/kernel' there; frozen by trainable: false, it keeps "
                                        "them for the whole run) keeps its initial weights"));

  // Resuming with c2 unfrozen is refused before anything is written; as frozen, it goes on.
  std::ofstream(dir / "c.yaml") << freeze(sample_unet_config(dir / "b", "  epochs: 3\n"), "c1");
  const std::string last = (dir / "b" / "last.h5").string();
  const std::string before = trainer::testing::slurp(last);
  const auto refused = run_trainer("--config " + (dir / "c.yaml").string() + " --gpus cpu --resume " + last, dir);
  CHECK(refused.code == 2);
  CHECK_THAT(refused.err, Catch::Contains("layer 'c2' trainable: false, the config says true"));
  CHECK(trainer::testing::slurp(last) == before);
  const auto resumed = run_trainer(b_args + " --epochs 3 --resume " + last, dir);
  CHECK(resumed.code == 0);
  const Checkpoint done = load_checkpoint(last);
  CHECK(done.epoch == 3);
  for (const auto& [name, values] : by_name(done.weights))
    if (name.rfind("c1/", 0) == 0 || name.rfind("c2/", 0) == 0) CHECK(values == start.at(name));
}
