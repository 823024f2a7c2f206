// Proves the data-parallel engine: N CPU towers reach the same weights as one
// tower on the same global batches (uneven splits, a short last batch, a batch
// smaller than the tower count), with synchronized BatchNormalization and
// seeded Dropout in the model; towers stay identical to each other.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "config/config.h"
#include "dist/async_communicator.h"
#include "tiny_model.h"
#include "train/trainer.h"

using namespace trainer;
using trainer::testing::tiny_config;
using trainer::testing::max_rel_diff;
using trainer::testing::tiny_data;

namespace {

// Runs the given batches with `towers` towers; returns tower 0's parameters and
// checks every tower holds the same bits.
std::vector<float> train(const Config& config, int towers, const std::vector<std::vector<int>>& batches,
                         std::vector<double>* losses = nullptr) {
  Dataset data = tiny_data();
  Trainer t(config, towers, 1);
  for (const auto& b : batches) {
    BatchStats s = t.train_step(data, b);
    REQUIRE(s.samples == double(b.size()));
    if (losses) losses->push_back(s.loss());
  }
  for (int r = 1; r < towers; ++r) REQUIRE(t.params(r) == t.params(0));
  for (int r = 1; r < towers; ++r) REQUIRE(t.state(r) == t.state(0));
  return t.params(0);
}

}  // namespace

TEST_CASE("split_batch gives near-equal contiguous shards", "[towers]") {
  using P = std::vector<std::pair<int, int>>;
  CHECK(split_batch(5, 2) == P{{0, 3}, {3, 5}});
  CHECK(split_batch(6, 3) == P{{0, 2}, {2, 4}, {4, 6}});
  CHECK(split_batch(2, 3) == P{{0, 1}, {1, 2}, {2, 2}});
}

TEST_CASE("N CPU towers reach the weights of one tower", "[towers][multitower]") {
  const Config config = parse_config(tiny_config(true), "tiny.yaml");
  // Batches of 5, 5 (uneven over 2 and 3 towers), a short last batch of 3, and
  // a batch of 2 (smaller than 3 towers: one tower gets no sample).
  const std::vector<std::vector<int>> batches = {
      {0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}, {3, 9}, {12, 0, 7, 2, 5}};
  std::vector<double> l1, l2, l3;
  const std::vector<float> one = train(config, 1, batches, &l1);
  const std::vector<float> two = train(config, 2, batches, &l2);
  const std::vector<float> three = train(config, 3, batches, &l3);
  const Dataset data = tiny_data();
  Trainer fresh(config, 1, 1);
  REQUIRE(max_rel_diff(fresh.params(0), one) > 1e-3);  // training moved the weights
  CHECK(max_rel_diff(two, one) < 2e-5);
  CHECK(max_rel_diff(three, one) < 2e-5);
  for (size_t i = 0; i < l1.size(); ++i) {
    CHECK(l2[i] == Approx(l1[i]).epsilon(1e-5));
    CHECK(l3[i] == Approx(l1[i]).epsilon(1e-5));
  }
}

TEST_CASE("gradient buckets of any size give the same step", "[towers][multitower]") {
  const Config config = parse_config(tiny_config(true), "tiny.yaml");
  const Dataset data = tiny_data();
  // {3, 9} leaves one of 3 towers without samples: it must form the same buckets.
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4}, {3, 9}, {10, 11, 12}};
  auto run = [&](size_t bucket_bytes) {
    Trainer t(config, 3, 1);
    t.set_bucket_bytes(bucket_bytes);
    for (const auto& b : batches) t.train_step(data, b);
    for (int r = 1; r < 3; ++r) REQUIRE(t.params(r) == t.params(0));
    return std::make_pair(t.params(0), t.state(0));
  };
  const auto one_bucket = run(Trainer::kBucketBytes);
  // 64 bytes: a reduction starts after almost every layer's backward, and every
  // bucket is applied by its own optimizer update.
  const auto many = run(64);
  CHECK(many.first == one_bucket.first);
  CHECK(many.second == one_bucket.second);
}

TEST_CASE("a synchronized BN whose output is unused keeps empty towers in step", "[towers][multitower]") {
  // 'dead' reaches no output: towers with samples skip its backward, so a
  // tower without samples must skip it too, or the collectives would pair up wrongly.
  std::string text = tiny_config(true);
  const std::string anchor = "    - {name: drop,";
  text.insert(text.find(anchor), "    - {name: dead, type: BatchNormalization, synchronized: true, inputs: [c2]}\n");
  text.replace(text.find(anchor), anchor.size(), "    - {name: drop, inputs: [cat],");
  const Config config = parse_config(text, "tiny.yaml");
  const std::vector<std::vector<int>> batches = {{3, 9}, {0, 1, 2, 3, 4}, {12}};
  CHECK(max_rel_diff(train(config, 3, batches), train(config, 1, batches)) < 2e-5);
}

TEST_CASE("a synchronized BN before every trainable weight keeps empty towers in step", "[towers][multitower]") {
  // bn0 has no gamma or beta and nothing before it trains: towers with samples
  // need no gradient there and skip its backward (Model::needs_gradient), so
  // a tower without samples must skip it too.
  std::string text = tiny_config(true);
  const std::string anchor = "    - {name: c1,";
  text.insert(text.find(anchor),
              "    - {name: bn0, type: BatchNormalization, synchronized: true, center: false, scale: false}\n");
  const Config config = parse_config(text, "tiny.yaml");
  const std::vector<std::vector<int>> batches = {{3, 9}, {0, 1, 2, 3, 4}, {12}};
  CHECK(max_rel_diff(train(config, 3, batches), train(config, 1, batches)) < 2e-5);
}

TEST_CASE("per-tower BatchNormalization statistics differ from one tower", "[towers][multitower]") {
  // Without synchronized BN each tower normalises with its own shard's
  // statistics (as Keras and DDP do), so 2 towers are not 1 tower.
  const Config config = parse_config(tiny_config(false), "tiny.yaml");
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}};
  CHECK(max_rel_diff(train(config, 2, batches), train(config, 1, batches)) > 1e-4);
}

TEST_CASE("evaluation sums are the same for any tower count", "[towers][multitower]") {
  const Config config = parse_config(tiny_config(true), "tiny.yaml");
  const Dataset data = tiny_data();
  std::vector<int> all(13);
  for (int i = 0; i < 13; ++i) all[size_t(i)] = i;
  Trainer a(config, 1, 1), b(config, 3, 1);
  BatchStats sa = a.evaluate(data, all, 4), sb = b.evaluate(data, all, 4);
  CHECK(sb.samples == 13);
  CHECK(sb.loss() == Approx(sa.loss()).epsilon(1e-6));
  CHECK(sb.counts.v == sa.counts.v);
}

TEST_CASE("DepthwiseConv2D, SeparableConv2D and grouped Conv2D on N CPU towers reach one tower's weights",
          "[towers][depthwise][multitower]") {
  std::string yaml = tiny_config(true);
  const std::string c2 = "    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}";
  REQUIRE(yaml.find(c2) != std::string::npos);
  yaml.replace(yaml.find(c2), c2.size(),
               "    - {name: c2, type: SeparableConv2D, filters: 8, kernel_size: 3, depth_multiplier: 2, padding: same, "
               "activation: relu}\n"
               "    - {name: dw, type: DepthwiseConv2D, kernel_size: 3, padding: same}\n"
               "    - {name: g, type: Conv2D, filters: 8, kernel_size: 3, groups: 4, padding: same, activation: relu}");
  const Config config = parse_config(yaml, "tiny.yaml");
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}, {3, 9}};
  const std::vector<float> one = train(config, 1, batches);
  const std::vector<float> two = train(config, 2, batches);
  const std::vector<float> three = train(config, 3, batches);
  Trainer fresh(config, 1, 1);
  REQUIRE(max_rel_diff(fresh.params(0), one) > 1e-3);  // training moved the weights
  CHECK(max_rel_diff(two, one) < 2e-5);
  CHECK(max_rel_diff(three, one) < 2e-5);
}

TEST_CASE("the first step of a global batch size starts its buckets after backward, later steps during it",
          "[towers]") {
  // The asynchronous communicator records each tower's calls: 's' a bucket's start, 'r' a synchronized BN
  // layer's sums (bn1 is reduced in backward between c2's bucket and c1's), 'b' a broadcast. Over 3 towers a
  // batch of 5 gives shards of 2, 2 and 1 samples, a batch of 3 of 1 each: tower 2's shape is not new there,
  // yet it holds its buckets as the others do, so that every tower interleaves its calls alike (the
  // communicator refuses otherwise).
  struct AsyncEnv {
    const char* was = std::getenv("TRAINER_TEST_ASYNC_COMM");
    std::string value = was ? was : "";
    AsyncEnv() { setenv("TRAINER_TEST_ASYNC_COMM", "0", 1); }
    ~AsyncEnv() { was ? setenv("TRAINER_TEST_ASYNC_COMM", value.c_str(), 1) : unsetenv("TRAINER_TEST_ASYNC_COMM"); }
  } env;
  Dataset data = tiny_data();
  Trainer t(parse_config(tiny_config(true), "tiny.yaml"), 3, 1);
  t.set_bucket_bytes(4);  // a bucket per layer
  const auto* comm = dynamic_cast<const AsyncCommunicator*>(&t.devices().comm());
  REQUIRE(comm);
  // Whether the step started a bucket before a BN reduction of its backward (tower 2's history from its first 's').
  auto overlapped = [&](const std::vector<int>& batch) {
    const size_t before = comm->history(2).size();
    t.train_step(data, batch);
    const std::string step = comm->history(2).substr(before);
    REQUIRE(step.find('s') != std::string::npos);
    return step.find('r', step.find('s')) != std::string::npos;
  };
  CHECK_FALSE(overlapped({0, 1, 2, 3, 4}));  // cuDNN would search in this backward: no bucket spins beside it
  CHECK(overlapped({5, 6, 7, 8, 9}));
  CHECK_FALSE(overlapped({10, 11, 12}));  // a new global batch
  CHECK(overlapped({0, 1, 2}));
  t.set_bucket_overlap(false);
  CHECK_FALSE(overlapped({3, 4, 5, 6, 7}));
  CHECK(comm->history(0) == comm->history(2));
  CHECK(comm->history(1) == comm->history(2));
}
