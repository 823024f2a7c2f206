// Step profile (Model::set_profiling, Trainer::set_profiling/profile_report)
// on CPU towers: every layer is timed once per step while on, the report names
// every layer and phase, and nothing is recorded while off.
#include <catch2/catch.hpp>

#include <random>

#include "config/config.h"
#include "train/trainer.h"

using namespace trainer;

namespace {

const char* const kConfig = R"(
model:
  name: tiny
  layers:
    - {name: in, type: Input, shape: [8, 8, 1]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: relu}
    - {name: bn1, type: BatchNormalization}
    - {name: p1, type: MaxPooling2D}
    - {name: u1, type: Conv2DTranspose, filters: 4, kernel_size: 2, strides: 2, padding: same}
    - {name: cat, type: Concatenate, inputs: [u1, bn1]}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data: {images: unused, masks: unused}
training:
  batch_size: 3
  seed: 1
  loss: binary_crossentropy
  optimizer: {type: SGD, learning_rate: 0.1}
)";

Dataset profile_data(int n) {
  Dataset d;
  d.images.resize(Shape{n, 8, 8, 1});
  d.masks.resize(Shape{n, 8, 8, 1});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (size_t i = 0; i < d.images.numel(); ++i) d.images.data()[i] = 255.f * u(rng);
  for (size_t i = 0; i < d.masks.numel(); ++i) d.masks.data()[i] = u(rng) > 0.7f ? 1.f : 0.f;
  for (int s = 0; s < n; ++s) d.names.push_back("s" + std::to_string(s));
  return d;
}

}  // namespace

TEST_CASE("profiling times every layer once per step and reports layers and phases", "[profile]") {
  const Config config = parse_config(kConfig, "tiny.yaml");
  const Dataset data = profile_data(3);
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
    CHECK(l.calls == 2);
    CHECK(l.forward_s > 0);
    CHECK(l.backward_s > 0);
    CHECK_THAT(report, Catch::Contains("\n" + l.name + " "));
  }
  for (const char* phase : {"gather/upload", "forward", "loss+metrics", "backward", "bucket waits+optimizer",
                            "stats reduction"})
    CHECK_THAT(report, Catch::Contains(phase));
  CHECK_THAT(report, Catch::Contains("2 step(s)"));

  // Turning it on again starts a new profile.
  t.set_profiling(true);
  for (const LayerTime& l : t.model().layer_times()) CHECK(l.calls == 0);
}
