// training.cuda_graphs on the CPU side (train/step_graphs.h): which layers
// keep a step from being replayed, the model's call count that tells a stale
// recording, a CPU run that asks for graphs (off with the reason, training as
// without them), and StepGraphs' choices (record, replay, run, fall back after
// a failed recording) against a scripted DeviceContext whose "recordings"
// run the work and whose graphs count their replays. The recording and replay
// themselves run on a GPU (tests/test_gpu_graphs.cpp).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "tiny_model.h"
#include "train/step_graphs.h"
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

/// A DeviceContext for a CPU model whose recordings run the work (nothing is
/// captured) and end as scripted: a graph that counts its replays, or a
/// failure for the recordings listed in `failing`.
class ScriptedContext final : public DeviceContext {
 public:
  int began = 0, replays = 0;
  std::set<int> failing;  ///< Recordings (numbered from 1 as begun) that fail.
  void* allocate(size_t bytes) override { return std::malloc(bytes); }
  void deallocate(void* p, size_t) noexcept override { std::free(p); }
  void copy(void*, const void*, size_t) override {}
  void zero(void*, size_t) override {}
  void synchronize() override {}
  void make_current() override {}
  void set_layer(const char*) override {}
  void* pinned_staging(size_t) override { return nullptr; }
  void upload_staged(void*, size_t) override {}
  void input_consumed() override {}
  double take_input_wait_seconds() override { return 0; }
  size_t peak_bytes() const override { return 0; }
  bool begin_recording() override {
    ++began;
    return true;
  }
  std::unique_ptr<DeviceGraph> end_recording(std::string& why) override {
    if (failing.count(began)) {
      why = "scripted failure";
      return nullptr;
    }
    return std::make_unique<Graph>(replays);
  }

 private:
  struct Graph final : DeviceGraph {
    explicit Graph(int& replays) : replays_(replays) {}
    void replay() override { ++replays_; }
    int& replays_;
  };
};

/// The tiny U-Net on a CPU device carrying a ScriptedContext, with its
/// weights bound, and a batch of n random samples in its input.
struct ScriptedTower {
  ScriptedContext context;
  Device device{DeviceKind::CPU, -1, &context};
  Config config = parse_config(tiny_unet_config(), "tiny.yaml");
  Model model{config.model, config.path};
  std::vector<float> params, grads, state;
  StepGraphs graphs;
  int reruns = 0;
  explicit ScriptedTower(int n) : params(model.num_params()), grads(model.num_params()), state(model.num_state()) {
    model.set_device(device);
    model.bind(params.data(), grads.data(), state.data());
    model.initialize(1, params.data(), state.data());
    Tensor& x = model.input_buffer();
    x.resize(model.input_shape().with_batch(n));
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(0.f, 255.f);
    for (size_t i = 0; i < x.numel(); ++i) x.data()[i] = u(rng);
  }
  /// One step through graphs: forward (recordable with `record`), a fixed dL/dy, backward.
  void step(bool record = true) {
    Context ctx{true, nullptr, 0, 1, 0, 0, model.input_buffer().shape().n, device};
    const Tensor& out = graphs.forward(model, ctx, record);
    Tensor& dy = model.output_grad_buffer();
    dy.resize(out.shape());
    for (size_t i = 0; i < dy.numel(); ++i) dy.data()[i] = 0.01f * float(i % 7);
    graphs.backward(model, ctx, dy, [&] {
      ++reruns;
      model.forward(ctx, model.input_buffer());
    });
  }
};

}  // namespace

TEST_CASE("StepGraphs records the second pass of a shape, replays it while nothing else calls the model, and "
          "records again after anything does",
          "[step_graphs]") {
  ScriptedTower t(2);
  const uint64_t c0 = t.model.calls();  // setting the device and binding the weights count too
  t.step(false);  // the search step: run
  CHECK(t.context.began == 0);
  CHECK(t.model.calls() == c0 + 2);
  t.step();  // recorded (the scripted recording runs the work) and replayed once each
  CHECK(t.context.began == 2);
  CHECK(t.context.replays == 2);
  CHECK(t.model.calls() == c0 + 4);
  for (int k = 1; k <= 3; ++k) {  // replays: the model is not called
    t.step();
    CHECK(t.model.calls() == c0 + 4);
    CHECK(t.context.replays == 2 + 2 * k);
    CHECK(t.graphs.replayed_steps() == k);
  }
  // Validation's forward: the recording is stale, the next step records again.
  Context inference{false, nullptr, 0, 1, 0, 0, 2, t.device};
  t.model.forward(inference, t.model.input_buffer());
  t.step();
  CHECK(t.context.began == 4);
  CHECK(t.graphs.replayed_steps() == 3);
  // A step that may not record (a profiled one, a new batch size) runs and drops the graphs.
  t.step(false);
  CHECK(t.context.began == 4);
  t.step();
  CHECK(t.context.began == 6);
  CHECK(t.graphs.replayed_steps() == 3);
  // The input buffer moved (a larger batch): recorded anew.
  t.model.input_buffer().resize(t.model.input_shape().with_batch(64));
  t.model.input_buffer().resize(t.model.input_shape().with_batch(2));
  t.step();
  CHECK(t.context.began == 8);
  CHECK(t.reruns == 0);
  CHECK(t.graphs.failure().empty());
}

TEST_CASE("a failed recording runs its step unrecorded (backward after forward again), and three end the recording",
          "[step_graphs]") {
  ScriptedTower t(2);
  t.step(false);
  // Recording 1 (forward) fails: forward runs unrecorded, and so does backward.
  t.context.failing = {1};
  uint64_t before = t.model.calls();
  t.step();
  CHECK(t.context.began == 1);
  CHECK(t.model.calls() == before + 3);  // the failed recording's forward, forward, backward
  CHECK(t.graphs.failure() == "scripted failure");
  CHECK(t.reruns == 0);
  // Recording 2 (forward) succeeds, 3 (backward) fails: forward runs again through rerun_forward, then backward.
  t.context.failing = {3, 4};
  before = t.model.calls();
  t.step();
  CHECK(t.context.began == 3);
  CHECK(t.reruns == 1);
  CHECK(t.model.calls() == before + 4);  // recorded forward, failed backward, forward again, backward
  t.step();  // nothing replays after a failure: recorded again (4 fails: the third failure)
  CHECK(t.context.began == 4);
  CHECK(t.graphs.replayed_steps() == 0);
  t.step();  // the run records no more
  t.step();
  CHECK(t.context.began == 4);
  CHECK(t.graphs.replayed_steps() == 0);
}

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
