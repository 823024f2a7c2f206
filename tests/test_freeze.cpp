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
#include "layer_testing.h"
#include "nn/model.h"
#include "process_testing.h"
#include "tiny_model.h"
#include "train/resume_check.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace trainer;
using trainer::testing::bind_random;
using trainer::testing::layer_from_yaml;
using trainer::testing::random_tensor;
using trainer::testing::run_trainer;
using trainer::testing::sample_unet_config;
using trainer::testing::tiny_config;
using trainer::testing::tiny_data;
using trainer::testing::tiny_frozen_config;
using trainer::testing::tensor_values;

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
  for (const char* l : {"bn1/", "c2/", "a2/", "s2/", "d2/", "u1/", "gn/", "ln/"})
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
  const std::string table = m.summary();
  CHECK_THAT(table, Catch::Contains("Total params: 565 (2.21 KB)") && Catch::Contains("Trainable params: 437 (1.71 KB)") &&
                        Catch::Contains("Non-trainable params: 128 (512.00 B)"));
  // Keras's show_trainable column: N frozen, Y trained, - no weights.
  CHECK_THAT(table, Catch::Contains("Param #     Trainable  Connected to\n") &&
                        Catch::Contains("\n c1 (Conv2D)                      (None, 16, 16, 4)     112         N          scale\n") &&
                        Catch::Contains("\n p1 (MaxPooling2D)                (None, 8, 8, 4)       0           -          bn1\n") &&
                        Catch::Contains("\n c2 (Conv2D)                      (None, 8, 8, 8)       296         Y          p1\n"));
  CHECK_THAT(all.summary(), !Catch::Contains("Trainable  "));
  // trainable: false on a layer without weights changes nothing.
  const Config drop = parse_config(freeze(tiny_config(false), "drop"), "tiny.yaml");
  const Model d(drop.model, drop.path);
  CHECK(d.frozen_layers().empty());
  CHECK(d.summary() == all.summary());
  CHECK(m.frozen_layers() == std::vector<std::string>{"c1", "bn1"});
}

TEST_CASE("trainable must be a boolean, not on the Input, and some weight must train", "[freeze]") {
  auto error = [](const std::string& text) -> std::string {
    try {
      const Config c = parse_config(text, "tiny.yaml");
      Model m(c.model, c.path);
      validate_for_training(c, m);
      require_trainable_weights(c, m);
    } catch (const UserError& e) {
      return e.what();
    }
    return "accepted";
  };
  std::string text = tiny_config(false);
  text.replace(text.find("{name: c1,"), 10, "{name: c1, trainable: maybe,");
  CHECK_THAT(error(text), Catch::Contains("tiny.yaml:7:") && Catch::Contains("trainable") &&
                              Catch::Contains("true or false"));
  // Python's keyword argument, as a user writes it.
  text = tiny_config(false);
  text.replace(text.find("{name: c1,"), 10, "{name: c1, trainable=False,");
  CHECK_THAT(error(text), Catch::Contains("unknown key 'trainable=False' (YAML writes a key and its value as "
                                          "'trainable: false'); known keys:"));
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

TEST_CASE("a frozen BatchNormalization computes as in inference, keeps its statistics and calls no collective",
          "[freeze][layers]") {
  const char* yaml = "{type: BatchNormalization, synchronized: true}";
  auto frozen = layer_from_yaml(yaml), open = layer_from_yaml(yaml);
  frozen->freeze();
  const Shape s{4, 3, 5, 6};
  // The same random weights in both (moving statistics far from 0 and 1); the frozen one without gradients.
  auto fw = bind_random(*frozen, {s.with_batch(0)}, 3), ow = bind_random(*open, {s.with_batch(0)}, 3);
  REQUIRE(fw.params == ow.params);
  std::vector<float*> params;
  for (auto& p : fw.params) params.push_back(p.data());
  frozen->bind(params, std::vector<float*>(params.size(), nullptr));
  CHECK_FALSE(frozen->collective());
  CHECK(open->collective());

  const Tensor x = random_tensor(s, 4, -2.f, 3.f), dy = random_tensor(s, 5);
  Tensor y_frozen(Shape{}, Device{}), y_open(Shape{}, Device{}), y_batch(Shape{}, Device{});
  Tensor dx_frozen(Shape{}, Device{}), dx_open(Shape{}, Device{});
  frozen->forward(trainer::testing::training_context(), {&x}, y_frozen);
  CHECK(fw.params == ow.params);  // the moving statistics stay
  open->forward(Context{}, {&x}, y_open);  // inference
  CHECK(tensor_values(y_frozen) == tensor_values(y_open));
  frozen->backward(trainer::testing::training_context(), {&x}, y_frozen, dy, {&dx_frozen});
  open->backward(Context{}, {&x}, y_open, dy, {&dx_open});  // after an inference forward: gamma * istd * dy
  CHECK(tensor_values(dx_frozen) == tensor_values(dx_open));
  // Control: the same layer trained normalises with the batch's statistics.
  open->forward(trainer::testing::training_context(), {&x}, y_batch);
  CHECK(tensor_values(y_batch) != tensor_values(y_open));
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
  // More steps: frozen weights and the frozen BatchNormalization's moving statistics keep their bits, also
  // under AdamW's weight decay (Keras decays the trainable weights only) and a global clipnorm.
  for (size_t i = 1; i < kBatches.size(); ++i) b.train_step(data, kBatches[i]);
  CHECK(b.state(0) == state0);
  for (const auto& [name, values] : by_name(b.weights()))
    if (is_frozen_layer(name)) CHECK(values == start.at(name));
  std::string adamw = tiny_frozen_config(true);
  const std::string sgd = "{type: SGD, learning_rate: 0.1, momentum: 0.9, nesterov: true}";
  adamw.replace(adamw.find(sgd), sgd.size(), "{type: AdamW, learning_rate: 0.01, weight_decay: 0.5, global_clipnorm: 1}");
  Trainer c(parse_config(adamw, "adamw.yaml"), 1, 1);
  for (const auto& batch : kBatches) c.train_step(data, batch);
  for (const auto& [name, values] : by_name(c.weights())) {
    INFO(name);
    CHECK((values == start.at(name)) == is_frozen_layer(name));
  }
}

TEST_CASE("N CPU towers with frozen layers reach the weights of one tower", "[freeze][towers][multitower]") {
  // bn1 is synchronized and frozen: it calls no collective, on towers with samples or without.
  trainer::testing::check_towers_reach_one_tower(parse_config(tiny_frozen_config(true), "frozen.yaml"));

  // A BatchNormalization that trains beside a frozen layer: its moving statistics lead the state buffer and
  // are tower 0's on every tower after each step; the frozen weights behind them keep their values.
  const Config config = parse_config(freeze(tiny_config(false), "c1"), "tiny.yaml");
  Trainer t(config, 3, 1);
  REQUIRE(t.model().num_moving_state() == 8);
  REQUIRE(t.model().num_state() == 8 + 112);
  const std::vector<float> before = t.state(0);
  const Dataset data = tiny_data();
  for (const auto& batch : kBatches) t.train_step(data, batch);
  const std::vector<float> after = t.state(0);
  CHECK(t.state(1) == after);
  CHECK(t.state(2) == after);
  CHECK(std::vector<float>(after.begin(), after.begin() + 8) != std::vector<float>(before.begin(), before.begin() + 8));
  CHECK(std::vector<float>(after.begin() + 8, after.end()) == std::vector<float>(before.begin() + 8, before.end()));
  CHECK(by_name(t.weights()).at("c1/kernel") == by_name(Trainer(config, 1, 1).weights()).at("c1/kernel"));
}

TEST_CASE("resuming with a layer frozen or unfrozen is refused, and the same setting resumes", "[freeze][resume]") {
  auto refusal = [](const std::string& now, const std::string& then) -> std::string {
    const Config c = parse_config(now, "now.yaml");
    const Model m(c.model, c.path);
    try {
      check_resume_trainable(parse_config(then, "then.yaml"), m, "run/last.h5");
    } catch (const UserError& e) {
      return e.what();
    }
    return "accepted";
  };
  const std::string plain = tiny_config(false), c1 = freeze(plain, "c1");
  CHECK(refusal(plain, c1) ==
        "run/last.h5 was trained with layer 'c1' trainable: false, which the config changes; the optimizer's state "
        "covers the trainable weights only and cannot carry over: set them back to resume, or start a new run from "
        "the checkpoint's weights with --initial-weights run/last.h5 and another --output (Keras's load_weights "
        "before fit)");
  CHECK_THAT(refusal(freeze(c1, "u1"), plain),
             Catch::StartsWith("run/last.h5 was trained with layer 'c1' trainable: true, layer 'u1' trainable: true, "
                               "which the config changes"));
  CHECK(refusal(c1, c1) == "accepted");
  // A BatchNormalization without gamma and beta has moving statistics only: frozen, they stop; the state is the
  // same, so the run resumes with the change reported.
  std::string stats_only = plain;
  stats_only.replace(stats_only.find("synchronized: false}"), 20, "synchronized: false, center: false, scale: false}");
  {
    const Config c = parse_config(freeze(stats_only, "bn1"), "now.yaml");
    const Model m(c.model, c.path);
    CHECK(check_resume_trainable(parse_config(stats_only, "then.yaml"), m, "run/last.h5") ==
          std::vector<std::string>{"layer 'bn1' trainable is false (the checkpoint's run used true)"});
  }
  // On a layer without weights the key changes nothing, so changing it is no difference.
  CHECK(refusal(freeze(plain, "drop"), plain) == "accepted");
  CHECK(refusal(plain, freeze(freeze(plain, "drop"), "p1")) == "accepted");
  // Nor is the default written out, among the other settings' differences.
  std::string explicit_true = plain;
  explicit_true.replace(explicit_true.find("{name: c2,"), 10, "{name: c2, trainable: true,");
  CHECK(resume_differences(parse_config(explicit_true, "tiny.yaml"), parse_config(plain, "tiny.yaml"), "run/last.h5")
            .empty());
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

  // Frozen layers without pretrained weights would keep random values: a warning says so.
  const auto random_run = run_trainer(b_args + " --epochs 1 --output " + (dir / "random").string(), dir);
  CHECK(random_run.code == 0);
  CHECK_THAT(random_run.err, Catch::Contains("warning: layers c1, c2 are frozen (trainable: false) and start from "
                                             "their initializers' random values"));
  CHECK_THAT(b_run.err, !Catch::Contains("random values"));

  // The frozen run's checkpoint evaluates and exports as any other.
  const std::string b_final = (dir / "b" / "final.h5").string(), sample = std::string(TRAINER_SOURCE_DIR) + "/data/sample";
  CHECK(run_trainer("evaluate --checkpoint " + b_final + " --images " + sample + "/images --masks " + sample +
                        "/masks --gpus cpu",
                    dir)
            .code == 0);
  CHECK(run_trainer("export --checkpoint " + b_final + " --output " + (dir / "b.onnx").string(), dir).code == 0);

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
  CHECK_THAT(refused.err, Catch::Contains("was trained with layer 'c2' trainable: false, which the config changes"));
  CHECK(trainer::testing::slurp(last) == before);
  const auto resumed = run_trainer(b_args + " --epochs 3 --resume " + last, dir);
  CHECK(resumed.code == 0);
  const Checkpoint done = load_checkpoint(last);
  CHECK(done.epoch == 3);
  for (const auto& [name, values] : by_name(done.weights))
    if (name.rfind("c1/", 0) == 0 || name.rfind("c2/", 0) == 0) CHECK(values == start.at(name));
}
