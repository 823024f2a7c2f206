// The per-epoch output (train/progress.h): without a terminal, a long epoch's
// progress on stderr once per quiet limit.
#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <sstream>

#include "train/progress.h"

using namespace trainer;

TEST_CASE("without a terminal, an epoch says how far it is once per quiet limit, on stderr", "[callbacks]") {
  // From a batch-job trial: nothing for 100 s per epoch when stdout is not a terminal, which CI jobs end.
  std::ostringstream log;
  const std::shared_ptr<spdlog::logger> before = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  Progress quiet(false, false, 3, 4, {}, std::chrono::hours(1));
  quiet.start_epoch(1);
  quiet.step(1, 0.5);
  Progress plain(false, false, 3, 4, {}, std::chrono::seconds(0));
  plain.start_epoch(2);
  plain.step(1, 0.5);
  plain.step(4, 0.25);  // the last step: the epoch's line follows
  spdlog::set_default_logger(before);
  CHECK(log.str().find("epoch 1/3") == std::string::npos);
  CHECK_THAT(log.str(), Catch::Contains("epoch 2/3: step 1/4, loss 0.5000"));
  CHECK(log.str().find("step 4/4") == std::string::npos);
}

TEST_CASE("the epoch line gives the metrics in the config's order, as Keras prints them", "[callbacks]") {
  // They came alphabetically (accuracy - binary_iou - dice - mean_iou).
  const std::map<std::string, double> logs = {{"loss", 0.5},      {"mean_iou", 0.25},    {"accuracy", 0.75},
                                              {"val_loss", 0.625}, {"val_mean_iou", 0.5}, {"val_accuracy", 0.875},
                                              {"learning_rate", 1e-05}};
  CHECK(format_logs(logs, {"mean_iou", "accuracy"}) ==
        "loss: 0.5000 - mean_iou: 0.2500 - accuracy: 0.7500 - val_loss: 0.6250 - val_mean_iou: 0.5000 - "
        "val_accuracy: 0.8750 - learning_rate: 1e-05");
}
