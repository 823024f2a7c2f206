// training.batch_size_per_device, learning_rate_scaling and the warm-up
// (train/batch_scaling.h): the config's rules, the global batch and rate a
// Trainer resolves for its towers, and the rate of each warm-up step.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/config.h"
#include "process_testing.h"
#include "tiny_model.h"
#include "train/batch_scaling.h"
#include "train/trainer.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// tiny_config (batch_size 5, SGD learning_rate 0.1) with its batch_size line replaced by `lines`.
std::string with_batch(const std::string& lines) {
  std::string s = tiny_config(false);
  const size_t at = s.find("  batch_size: 5\n");
  REQUIRE(at != std::string::npos);
  return s.replace(at, 16, lines);
}

}  // namespace

TEST_CASE("batch_size_per_device and learning_rate_scaling are refused where they cannot apply", "[config][scaling]") {
  auto parse = [](const std::string& text) { return parse_config(text, "cfg.yaml"); };
  CHECK_THROWS_WITH(parse(with_batch("  batch_size: 8\n  batch_size_per_device: 2\n")),
                    Catch::Contains("'batch_size_per_device' and batch_size both set the batch"));
  CHECK_THROWS_WITH(parse(with_batch("  batch_size: 8\n  learning_rate_scaling: linear\n")),
                    Catch::Contains("give that batch as training.batch_size_per_device"));
  CHECK_THROWS_WITH(parse(with_batch("  batch_size_per_device: 2\n  learning_rate_scaling: cubic\n")),
                    Catch::Contains("learning_rate_scaling") && Catch::Contains("linear"));
  CHECK_THROWS_WITH(parse(with_batch("  batch_size_per_device: 2\n  learning_rate_warmup_epochs: 2\n")),
                    Catch::Contains("set learning_rate_scaling"));
  CHECK_THROWS_WITH(parse(with_batch("  batch_size_per_device: 0\n")), Catch::Contains("batch_size_per_device"));
  std::string scheduled = with_batch("  batch_size_per_device: 2\n  learning_rate_scaling: sqrt\n");
  const size_t at = scheduled.find("learning_rate: 0.1");
  REQUIRE(at != std::string::npos);
  scheduled.replace(at, 18, "learning_rate: {type: ExponentialDecay, initial_learning_rate: 0.1, decay_steps: 10, "
                            "decay_rate: 0.9}");
  CHECK_THROWS_WITH(parse(scheduled), Catch::Contains("does not scale a learning_rate schedule (ExponentialDecay)"));
  CHECK_THROWS_WITH(parse(with_batch("  batch_size_per_devce: 2\n")), Catch::Contains("batch_size_per_device"));
  // The data section's misplaced key names its section.
  std::string misplaced = with_batch("");
  const std::string data = "data: {images: unused, masks: unused}";
  REQUIRE(misplaced.find(data) != std::string::npos);
  misplaced.replace(misplaced.find(data), data.size(),
                    "data: {images: unused, masks: unused, batch_size_per_device: 2}");
  CHECK_THROWS_WITH(parse(misplaced), Catch::Contains("training.batch_size_per_device"));
}

TEST_CASE("the global batch is the per-device batch times the towers, the rate scaled by k or sqrt(k)",
          "[scaling]") {
  TrainingConfig t;
  t.optimizer.learning_rate = 0.1;
  CHECK(resolve_batch_scaling(t, 4) == 1.0);  // batch_size as given: nothing changes
  CHECK(t.batch_size == 32);
  CHECK(t.optimizer.learning_rate == 0.1);
  t.batch_size_per_device = 3;
  CHECK(resolve_batch_scaling(t, 4) == 1.0);  // learning_rate_scaling none
  CHECK(t.batch_size == 12);
  CHECK(t.optimizer.learning_rate == 0.1);
  t.learning_rate_scaling = LearningRateScaling::Linear;
  CHECK(resolve_batch_scaling(t, 4) == 4.0);
  CHECK(t.optimizer.learning_rate == Approx(0.4).epsilon(1e-15));
  t.optimizer.learning_rate = 0.1;
  t.learning_rate_scaling = LearningRateScaling::Sqrt;
  CHECK(resolve_batch_scaling(t, 4) == 2.0);
  CHECK(t.optimizer.learning_rate == Approx(0.2).epsilon(1e-15));
}

TEST_CASE("the warm-up rises linearly from the unscaled rate to the scaled one, then stays", "[scaling]") {
  CHECK(warmup_factor(0, 4, 0.25) == 0.25);
  CHECK(warmup_factor(2, 4, 0.25) == 0.625);
  CHECK(warmup_factor(4, 4, 0.25) == 1.0);
  CHECK(warmup_factor(100, 4, 0.25) == 1.0);
  CHECK(warmup_factor(0, 0, 0.25) == 1.0);  // no warm-up
}

TEST_CASE("a Trainer resolves the per-device batch and scaled rate over its towers and warms up", "[scaling][towers][multitower]") {
  const Config config =
      parse_config(with_batch("  batch_size_per_device: 2\n  learning_rate_scaling: linear\n"
                              "  learning_rate_warmup_epochs: 1\n"),
                   "cfg.yaml");
  Trainer trainer(config, 3, 1);
  CHECK(trainer.config().training.batch_size == 6);
  CHECK(trainer.learning_rate_scale() == 3.0);
  CHECK(trainer.learning_rate() == Approx(0.3).epsilon(1e-15));
  trainer.set_learning_rate_warmup(4);
  CHECK(trainer.learning_rate_at(0) == Approx(0.1).epsilon(1e-12));  // Goyal et al.: from the unscaled rate
  CHECK(trainer.learning_rate_at(2) == Approx(0.2).epsilon(1e-12));
  CHECK(trainer.learning_rate_at(4) == Approx(0.3).epsilon(1e-12));
  // The update of step 0 uses the unscaled rate: one step equals one without scaling or warm-up.
  const Config plain = parse_config(with_batch("  batch_size: 6\n"), "cfg.yaml");
  Trainer reference(plain, 3, 1);
  const Dataset data = tiny_data();
  const std::vector<int> batch = {0, 1, 2, 3, 4, 5};
  trainer.train_step(data, batch);
  reference.train_step(data, batch);
  CHECK(trainer.params(0) == reference.params(0));
}

TEST_CASE("the --batch-size flag with batch_size_per_device in the config is refused, naming both", "[scaling][e2e]") {
  TempDir tmp("batch_flag");
  std::ofstream(tmp.root / "unet.yaml") << sample_unet_config(tmp.root / "run", "  batch_size_per_device: 2\n");
  const Run r = run_trainer("--config " + (tmp.root / "unet.yaml").string() + " --gpus cpu --batch-size 8", tmp.root);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--batch-size sets the global batch") &&
                        Catch::Contains("training.batch_size_per_device"));
  CHECK_FALSE(std::filesystem::exists(tmp.root / "run"));
}
