#pragma once
// The training command's flags (add_train registers them) and what they do
// to the config; run_train (train_run.cpp) runs the command.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace trainer::cli {

/// trainer --config FILE --gpus SPEC [overrides], as parsed.
struct TrainFlags {
  bool gpus_given = false;  ///< --gpus on the command line
  std::string config, gpus = "all", output, images, masks, resume, initial_weights, log_format = "text", precision;
  bool overwrite = false;
  std::optional<int> epochs, batch_size, threads;
  std::optional<uint64_t> seed;
  std::vector<std::string> command_line;  ///< argv as given
};

/// Applies the override flags (--epochs, --batch-size, --seed, --output,
/// --images, --masks, --initial-weights, --precision) to config, and to its
/// text too, so that checkpoints store the settings the run really used (the
/// text is then re-emitted without comments). UserError when --batch-size
/// meets a config that gives training.batch_size_per_device.
void apply_overrides(Config& config, const TrainFlags& f);

/// Trains as f says: joins the run's processes (under mpirun or srun),
/// checks the config, towers, output folder and data, resumes or starts the
/// run, trains it (fit) and reports the files written. Returns the exit code:
/// 0, or 128 + the signal that stopped the run. UserError for bad input.
int run_train(const TrainFlags& f);

}  // namespace trainer::cli
