// CUDA graphs (training.cuda_graphs): a context records its compute stream's
// work without running it and replays it with the same addresses; the blocks
// freed while recording stay out of other work while the graph lives; a
// recording that waits for the device fails without harm; and a tower that
// replays its recorded training steps trains as one that runs every step
// (the same kernels and algorithms: the losses and weights of two runs of one
// tower, to the tolerance of cuDNN's algorithm choice, which each Trainer
// measures anew), recording again after validation and after a batch of
// another size. Without a GPU every case skips with a warning.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/elementwise_ops.h"
#include "config/config.h"
#include "gpu_testing.h"
#include "tiny_model.h"
#include "train/trainer.h"
#include "training_compare.h"

using namespace trainer;
using namespace trainer::testing;

TEST_CASE("a recorded graph runs nothing until replayed, then the recorded work on the buffers' current values",
          "[gpu][gpu_graphs]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const size_t n = 1000, bytes = n * sizeof(float);
  Buffer<float> x(g.device, n), y(g.device, n);
  x.copy_from_host(random_values(n, 1));
  y.zero();
  DeviceContext& c = *g.ctx;
  REQUIRE(c.begin_recording());
  auto* tmp = static_cast<float*>(c.allocate(bytes));  // a step's scratch: allocated and freed while recording
  scale_shift_forward(g.device, x.data(), 2.f, 1.f, tmp, n);
  scale_shift_forward(g.device, tmp, 1.f, -1.f, y.data(), n);
  c.deallocate(tmp, bytes);
  std::string why;
  std::unique_ptr<DeviceGraph> graph = c.end_recording(why);
  REQUIRE(graph);
  CHECK(why.empty());
  c.synchronize();
  CHECK(y.to_host() == std::vector<float>(n, 0.f));  // recorded, not run
  // The scratch the graph writes is lent to no other work while the graph lives.
  void* other = c.allocate(bytes);
  CHECK(other != tmp);
  for (int round = 0; round < 2; ++round) {  // new inputs in the same buffer: the replay reads them
    const std::vector<float> host = random_values(n, unsigned(10 + round));
    x.copy_from_host(host);
    graph->replay();
    const std::vector<float> got = y.to_host();
    for (size_t i = 0; i < n; ++i) CHECK(got[i] == Approx(2 * host[i]).margin(1e-6));
  }
  c.deallocate(other, bytes);
  graph.reset();  // the graphs' pool goes back to the cache with the last graph
  void* a = c.allocate(bytes);
  void* b = c.allocate(bytes);
  CHECK((a == tmp || b == tmp));
  c.deallocate(a, bytes);
  c.deallocate(b, bytes);
}

TEST_CASE("a recording that waits for the device fails with the reason, and the context works on",
          "[gpu][gpu_graphs]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const size_t n = 256;
  Buffer<float> x(g.device, n), y(g.device, n);
  x.copy_from_host(std::vector<float>(n, 3.f));
  DeviceContext& c = *g.ctx;
  REQUIRE(c.begin_recording());
  scale_shift_forward(g.device, x.data(), 1.f, 1.f, y.data(), n);
  CHECK_THROWS(c.synchronize());  // a wait: the capture refuses it
  std::string why;
  CHECK_FALSE(c.end_recording(why));
  CHECK_THAT(why, Catch::Contains("cudaStreamEndCapture"));
  scale_shift_forward(g.device, x.data(), 1.f, 1.f, y.data(), n);
  CHECK(y.to_host() == std::vector<float>(n, 4.f));
}

namespace {

/// Losses and weights of one tower on GPU 0 over steps of two batch sizes
/// with validation between them; its replayed steps.
struct GraphRun {
  std::vector<double> losses;
  std::vector<WeightRecord> weights;
  int64_t replayed = 0;
};

GraphRun graph_run(Config config, bool graphs) {
  config.training.cuda_graphs = graphs;
  Trainer t(config, plan("0"), 1);
  REQUIRE(t.cuda_graphs() == graphs);
  const Dataset data = tiny_data();
  const std::vector<int> a = {0, 1, 2, 3, 4}, b = {5, 6, 7, 8, 9}, small = {10, 11, 12};
  GraphRun run;
  // 5: search, record, replay, replay; validation; record, replay; 3: search; 5: record, replay.
  for (const std::vector<int>* batch : {&a, &b, &a, &b}) run.losses.push_back(t.train_step(data, *batch).loss());
  run.losses.push_back(t.evaluate(data, {0, 1, 2, 3, 4, 5, 6}, 5).loss());
  for (const std::vector<int>* batch : {&a, &b, &small, &a, &b})
    run.losses.push_back(t.train_step(data, *batch).loss());
  t.synchronize();
  run.weights = t.weights();
  run.replayed = t.replayed_steps();
  return run;
}

}  // namespace

TEST_CASE("a GPU tower replaying its recorded steps trains as one running them (fp32, bf16, BN, pooling, skips)",
          "[gpu][gpu_training][gpu_graphs]") {
  TRAINER_REQUIRE_GPU();
  const std::string bn = tiny_config(true);
  const std::string bn_no_drop = bn.substr(0, bn.find("rate: 0.2")) + "rate: 0.0" + bn.substr(bn.find("rate: 0.2") + 9);
  for (const std::string& yaml : {tiny_unet_config(), bn_no_drop}) {
    for (Precision p : {Precision::FP32, Precision::BF16}) {
      INFO(yaml << "\nprecision " << precision_name(p));
      Config config = parse_config(yaml, "tiny.yaml");
      config.training.precision = p;
      const GraphRun run = graph_run(config, false), replayed = graph_run(config, true);
      CHECK(run.replayed == 0);
      CHECK(replayed.replayed == 4);
      const double tol = p == Precision::BF16 ? 2e-2 : kLossTolFp32;
      check_losses(replayed.losses, run.losses, tol);
      const std::vector<WeightRecord> initial = Trainer(config, plan("0"), 1).weights();
      check_weight_changes(replayed.weights, run.weights, initial, p == Precision::BF16 ? 2e-2 : kWeightTolFp32);
    }
  }
}

TEST_CASE("training.cuda_graphs is off, naming why, for two towers and for a model that drops out",
          "[gpu][gpu_graphs]") {
  TRAINER_REQUIRE_GPU();
  Config unet = parse_config(tiny_unet_config(), "tiny.yaml");
  unet.training.cuda_graphs = true;
  const Trainer two(unet, plan("0,0"), 1);
  CHECK_FALSE(two.cuda_graphs());
  CHECK_THAT(two.why_no_cuda_graphs(), Catch::Contains("the run has 2 towers"));
  Config dropping = parse_config(tiny_config(false), "tiny.yaml");
  dropping.training.cuda_graphs = true;
  const Trainer one(dropping, plan("0"), 1);
  CHECK_FALSE(one.cuda_graphs());
  CHECK(one.why_no_cuda_graphs() == "layer 'drop' (Dropout) draws new random values every step");
}
