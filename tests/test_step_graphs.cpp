// training.cuda_graphs on the CPU side (train/step_graphs.h): which layers
// keep a step from being replayed, the model's call count that tells a stale
// recording, and a CPU run that asks for graphs: off with the reason, and
// training as without them. The recording and replay themselves run on a GPU
// (tests/test_gpu_graphs.cpp).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "config/config.h"
#include "tiny_model.h"
#include "train/trainer.h"
#include "training_compare.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// s with its first `from` replaced by `to` (the test's configs hold it).
std::string edit(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("Model::unreplayable_layer names a Dropout that draws masks, and nothing else", "[step_graphs]") {
  const Config dropping = parse_config(tiny_config(false), "tiny.yaml");
  CHECK(Model(dropping.model, dropping.path).unreplayable_layer() == "'drop' (Dropout)");
  const Config spatial = parse_config(edit(tiny_config(false), "type: Dropout", "type: SpatialDropout2D"), "t.yaml");
  CHECK(Model(spatial.model, spatial.path).unreplayable_layer() == "'drop' (SpatialDropout2D)");
  // A rate of 0 drops nothing: no mask, nothing per step.
  const Config kept = parse_config(edit(tiny_config(false), "rate: 0.2", "rate: 0.0"), "tiny.yaml");
  CHECK(Model(kept.model, kept.path).unreplayable_layer().empty());
  const Config unet = parse_config(tiny_unet_config(), "tiny.yaml");
  CHECK(Model(unet.model, unet.path).unreplayable_layer().empty());
}

TEST_CASE("Model::calls counts every forward and backward: a training step two, validation one a batch",
          "[step_graphs]") {
  const Config config = parse_config(tiny_unet_config(), "tiny.yaml");
  Trainer t(config, plan("cpu"), 1);
  const Dataset data = tiny_data();
  const uint64_t start = t.model().calls();
  t.train_step(data, kBatches[0]);
  CHECK(t.model().calls() == start + 2);
  t.evaluate(data, {0, 1, 2, 3, 4, 5}, 4);  // two batches
  CHECK(t.model().calls() == start + 4);
}

TEST_CASE("training.cuda_graphs on CPU towers is off with a warning saying why, and trains as without it",
          "[step_graphs]") {
  Config config = parse_config(tiny_unet_config(), "tiny.yaml");
  const Dataset data = tiny_data();
  const auto losses = [&](bool graphs) {
    config.training.cuda_graphs = graphs;
    Trainer t(config, plan("cpu"), 1);
    CHECK_FALSE(t.cuda_graphs());
    CHECK(t.why_no_cuda_graphs() == (graphs ? "CPU towers queue no GPU work to record" : ""));
    std::vector<double> l;
    for (const std::vector<int>& b : kBatches) l.push_back(t.train_step(data, b).loss());
    CHECK(t.replayed_steps() == 0);
    return l;
  };
  CHECK(losses(true) == losses(false));
}
