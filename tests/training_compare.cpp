#include "training_compare.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "backend/gpu_info.h"
#include "config/config.h"
#include "tiny_model.h"

namespace trainer::testing {

const std::string kTinyConfig = tiny_config(true);

const std::vector<std::vector<int>> kBatches = {
    {0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}, {3, 9}, {12, 0, 7, 2, 5}};

DevicePlan plan(const std::string& spec) { return plan_devices(spec, list_gpus(), true); }

std::vector<float> all_weights(const Trainer& t) {
  std::vector<float> v;
  for (const WeightRecord& w : t.weights()) v.insert(v.end(), w.values.begin(), w.values.end());
  return v;
}

TrainRun train_run(const std::string& spec, Precision p, const std::string& yaml, ProcessGroup* world) {
  Config config = parse_config(yaml, "tiny.yaml");
  config.training.precision = p;
  const Dataset data = tiny_data();
  const DevicePlan devices = plan(spec);
  Trainer t(config, devices, 1, world);
  if (world) REQUIRE(t.devices().reduction() == "NCCL over 1 process");
  TrainRun run;
  for (const std::vector<int>& b : kBatches) run.losses.push_back(t.train_step(data, b).loss());
  run.weights = all_weights(t);
  run.records = t.weights();
  return run;
}

void check_weight_changes(const std::vector<WeightRecord>& got, const std::vector<WeightRecord>& ref,
                          const std::vector<WeightRecord>& initial, double tol) {
  REQUIRE(got.size() == ref.size());
  REQUIRE(initial.size() == ref.size());
  for (size_t r = 0; r < ref.size(); ++r) {
    const std::vector<float>&g = got[r].values, &c = ref[r].values, &w0 = initial[r].values;
    REQUIRE(g.size() == c.size());
    double diff = 0, scale = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      diff = std::max(diff, std::abs((double(g[i]) - w0[i]) - (double(c[i]) - w0[i])));
      scale = std::max(scale, std::abs(double(c[i]) - w0[i]));
    }
    if (scale == 0) continue;  // untouched (non-trainable state that does not move)
    INFO(ref[r].layer << "/" << ref[r].name << ": max |dgot - dref| / max |dref| = " << diff / scale);
    CHECK(diff <= tol * scale);
  }
}

void check_losses(const std::vector<double>& got, const std::vector<double>& ref, double tol) {
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("step " << i + 1 << ": loss " << got[i] << ", reference " << ref[i]);
    CHECK(std::isfinite(got[i]));
    CHECK(std::abs(got[i] - ref[i]) <= tol * std::abs(ref[i]));
  }
}


}  // namespace trainer::testing
