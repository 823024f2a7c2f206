// The settings that the processes of an MPI run compare once joined: what
// counts as the same (key order, number spelling, style, null), what may
// differ (paths, loader threads), and how a difference is named
// (test_mpi_runs.cpp runs the comparison under mpirun).
#include <catch2/catch.hpp>

#include <filesystem>
#include <optional>
#include <string>

#include "config/shared_settings.h"
#include "process_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// The difference of two YAML texts as "key: a | b", or "" when they are the same settings.
std::string diff(const std::string& a, const std::string& b) {
  const std::optional<SettingDifference> d = settings_difference(a, b);
  return d ? d->key + ": " + d->a + " | " + d->b : "";
}

/// shared_settings of the sample U-Net's config with `training` lines added and its validation_split line
/// replaced by `validation` when given.
std::string settings(const std::string& training, const std::string& validation = "", bool resumes = false) {
  std::string text = sample_unet_config("/tmp/run", training);
  const std::string split = "  validation_split: 0.2\n";
  if (!validation.empty()) text.replace(text.find(split), split.size(), validation);
  return shared_settings(parse_config(text, "a.yaml"), resumes);
}

}  // namespace

TEST_CASE("settings are compared as values: key order, number spelling, style, comments and null do not count",
          "[config][mpi]") {
  CHECK(diff("a: {x: 1, y: 0.01}\nb: [1, 2]", "# a comment\nb:\n  - 1\n  - 2\na:\n  y: 1e-2\n  x: 1.0") == "");
  CHECK(diff("a: {x: 1, z: null}", "a: {x: 1}") == "");  // null: left out, as the config reader takes it
  CHECK(diff("a: {x: '1'}", "a: {x: 1}") == "");  // the same number
  CHECK(diff("a: {x: true}", "a: {x: yes}") == "a.x: true | yes");  // other words stay other settings
  // Numbers as the config reader decodes them: 010 is octal 8 for yaml-cpp, and seeds need all 64 bits.
  CHECK(diff("a: {x: 010}", "a: {x: 10}") == "a.x: 010 | 10");
  CHECK(diff("a: {x: 010}", "a: {x: 8}") == "");
  CHECK(diff("a: {seed: 9007199254740993}", "a: {seed: 9007199254740992}") ==
        "a.seed: 9007199254740993 | 9007199254740992");
  CHECK(diff("a: {seed: 18446744073709551615}", "a: {seed: 18446744073709551615}") == "");
}

TEST_CASE("a difference is named by its dotted key, list entries by index and name or type", "[config][mpi]") {
  const std::string layers = "model:\n  layers:\n    - {name: input, type: Input}\n    - {name: c1, type: Conv2D, ";
  CHECK(diff(layers + "filters: 4}", layers + "filters: 8}") == "model.layers[1] (c1).filters: 4 | 8");
  CHECK(diff(layers + "filters: 4}", "model:\n  layers:\n    - {name: input, type: Input}") ==
        "model.layers[1] (c1): {name: c1, type: Conv2D, filters: 4} | not given");
  CHECK(diff("training:\n  callbacks: [{type: EarlyStopping, patience: 3}]",
             "training:\n  callbacks: [{type: EarlyStopping, patience: 5}]") ==
        "training.callbacks[0] (EarlyStopping).patience: 3 | 5");
  CHECK(diff("data: {shuffle: true}", "data: {}") == "data.shuffle: true | not given");
  const std::optional<SettingDifference> long_list = settings_difference("a: [" + std::string(200, 'x') + "]", "a: 1");
  REQUIRE(long_list);
  CHECK(long_list->a.size() == 80);  // cut, with "..."
}

TEST_CASE("the shared settings leave out what may differ between hosts and keep whether paths are given",
          "[config][mpi]") {
  const std::string plain = settings("  epochs: 1\n");
  // Another output folder, loader thread count, or data folder: the same run.
  std::string moved = sample_unet_config("/elsewhere/run", "  epochs: 1\n");
  const std::string sample = std::string(TRAINER_SOURCE_DIR) + "/data/sample";
  for (const std::string folder : {"/images", "/masks"})
    moved.replace(moved.find(sample + folder), sample.size() + folder.size(), "/mnt" + folder);
  moved.insert(moved.find("  validation_split"), "  loader_threads: 3\n");
  CHECK(diff(shared_settings(parse_config(moved, "b.yaml"), false), plain) == "");
  // Validation folders on one host alone, or another number of epochs: not the same run.
  CHECK(diff(settings("  epochs: 1\n", "  validation_images: /v/i\n  validation_masks: /v/m\n"),
             settings("  epochs: 1\n")) == "data.validation_images: given | not given");
  CHECK(diff(settings("  epochs: 3\n"), plain) == "training.epochs: 3 | 1");
  CHECK(diff(settings("  epochs: 1\n", "", true), plain) == "--resume: given | not given");
  // initial_weights: a path or {filepath} of another path is the same setting; null is none; skip_mismatch counts.
  const std::string path = settings("  epochs: 1\n  initial_weights: /a/w.h5\n");
  CHECK(diff(settings("  epochs: 1\n  initial_weights: {filepath: /b/w.h5}\n"), path) == "");
  CHECK(diff(settings("  epochs: 1\n  initial_weights: null\n"), plain) == "");
  CHECK(diff(settings("  epochs: 1\n  initial_weights: {filepath: /a/w.h5, skip_mismatch: true}\n"), path) ==
        "training.initial_weights.skip_mismatch: true | false");
  CHECK(diff(path, plain) == "training.initial_weights: {filepath: given, skip_mismatch: false} | not given");
}
