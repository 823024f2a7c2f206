// Step profile (Model::set_profiling, Trainer::set_profiling/profile_report)
// on CPU towers: every layer is timed once per step while on, the report names
// every layer, its output type and every phase, and nothing is recorded while off.
#include <catch2/catch.hpp>

#include "config/config.h"
#include "tiny_model.h"
#include "train/trainer.h"

using namespace trainer;

TEST_CASE("profiling times every layer once per step and reports layers and phases", "[profile]") {
  const Config config = parse_config(testing::tiny_config(false), "tiny.yaml");
  const Dataset data = testing::tiny_data();
  const std::vector<int> batch{0, 1, 2};
  Trainer t(config, 2, 1);
  t.train_step(data, batch);
  for (const LayerTime& l : t.model().layer_times()) {
    INFO(l.name);
    CHECK(l.calls == 0);
    CHECK(l.forward_s == 0);
    CHECK(l.backward_s == 0);
  }

  t.set_profiling(true);
  t.train_step(data, batch);
  t.train_step(data, batch);
  t.set_profiling(false);
  t.train_step(data, batch);  // off again: not counted

  const std::vector<LayerTime> times = t.model().layer_times();
  REQUIRE(int(times.size()) == t.model().num_layers() - 1);  // every layer but the Input
  const std::string report = t.profile_report();
  for (size_t i = 0; i < times.size(); ++i) {
    const LayerTime& l = times[i];
    INFO(l.name);
    CHECK(l.name == t.model().layer(int(i) + 1).name());
    CHECK(l.type == t.model().layer(int(i) + 1).type());
    CHECK(l.output == DType::F32);  // CPU towers store fp32
    CHECK(l.calls == 2);
    CHECK(l.forward_s > 0);
    // Backward skips the layers before the first trainable one (Model::needs_gradient).
    if (t.model().needs_gradient(int(i) + 1))
      CHECK(l.backward_s > 0);
    else
      CHECK(l.backward_s == 0);
    CHECK_THAT(report, Catch::Contains("\n" + l.name + " "));
  }
  for (const char* phase : {"gather/upload", "forward", "loss+metrics", "backward", "bucket waits+optimizer",
                            "stats reduction"})
    CHECK_THAT(report, Catch::Contains(phase));
  CHECK_THAT(report, Catch::Contains("2 step(s)"));
  CHECK_THAT(report, Catch::Contains(" output ") && Catch::Contains(" fp32 ") && !Catch::Contains("bf16"));

  // Turning it on again starts a new profile.
  t.set_profiling(true);
  for (const LayerTime& l : t.model().layer_times()) CHECK(l.calls == 0);
}
