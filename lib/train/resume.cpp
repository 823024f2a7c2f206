#include "train/resume.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "backend/cpu_info.h"
#include "core/error.h"
#include "train/resume_check.h"
#include "train/run_folder.h"

namespace trainer {

namespace {

// Whether EarlyStopping ended the checkpoint's run at its epoch (the
// checkpoint says so: training_state/early_stopped) and config's
// EarlyStopping would end it again at once: its wait counter (watched epochs
// without improvement) has reached config's patience. Raising the patience,
// or removing EarlyStopping, trains on.
bool early_stopping_ended(const Checkpoint& ckpt, const Config& config) {
  const auto flag = ckpt.state_scalars.find("early_stopped"), wait = ckpt.state_scalars.find("early_stopping_wait");
  return flag != ckpt.state_scalars.end() && flag->second == 1 && wait != ckpt.state_scalars.end() &&
         config.training.early_stopping.enabled && wait->second >= config.training.early_stopping.patience;
}

/// The config that trained ckpt (read from path), as it trained: one that
/// names no optimizer and holds no optimizer slots was written by an older
/// build, whose default was SGD(0.01), not Keras's RMSprop(0.001).
Config stored_config(const Checkpoint& ckpt, const std::string& path) {
  Config then = parse_config(ckpt.config_yaml, path + " (its stored config)");
  bool slots = false;
  for (const auto& kv : ckpt.state_arrays) slots |= kv.first.rfind("optimizer_", 0) == 0;
  if (const YAML::Node stored = YAML::Load(ckpt.config_yaml)["training"];
      stored.IsMap() && !stored["optimizer"] && !slots && ckpt.state_scalars.count("optimizer_iterations")) {
    then.training.optimizer = OptimizerConfig{};
    then.training.optimizer.type = OptimizerKind::SGD;
    then.training.optimizer.learning_rate = 0.01;
    spdlog::info("{}: its run's config names no optimizer and it holds no optimizer slots: it trained with SGD "
                 "(learning rate 0.01), the default when it was written (RMSprop now)", path);
  }
  return then;
}

/// Warns of each way config differs from then (the checkpoint's, at path);
/// UserError from the checks for a setting that cannot carry over.
void warn_differences(const Config& config, const Config& then, const Trainer& trainer, const std::string& path) {
  std::vector<std::string> differences = check_resume_trainable(then, trainer.model(), path);
  for (std::string& d : resume_differences(config, then, path)) differences.push_back(std::move(d));
  // CPU towers compute fp32 and tf32 alike (cpu_precision).
  const auto effective = [&](Precision p) { return trainer.devices().any_gpu() ? p : cpu_precision(p); };
  if (effective(config.training.precision) != effective(then.training.precision))
    differences.push_back(std::string("training.precision is ") + precision_name(config.training.precision) +
                          " (the checkpoint's run used " + precision_name(then.training.precision) + ")");
  for (const auto& d : differences)
    spdlog::warn("resuming with other settings: {}; the run continues but is no longer the one that was stopped", d);
}

/// The run's result when ckpt (at path) leaves nothing to train under config
/// (its epochs are done, or EarlyStopping ended it and would again), after a
/// warning saying how to train further; else nullopt.
std::optional<FitResult> nothing_left(const Checkpoint& ckpt, const std::string& path, const Config& config) {
  FitResult done;
  done.epochs_run = ckpt.epoch;
  done.last_logs = ckpt.logs;
  auto next = ckpt.state_scalars.find("next_epoch");
  // An out-of-range or NaN value is left to fit's checks, which name it (int() of it would be undefined).
  if (next != ckpt.state_scalars.end() && next->second >= 1 && next->second <= double(1 << 30) &&
      int(next->second) > config.training.epochs) {
    spdlog::warn("{} has already trained {} epoch(s), at least training.epochs ({}); nothing to do: raise "
                 "--epochs to train further",
                 path, int(next->second) - 1, config.training.epochs);
    return done;
  }
  if (!early_stopping_ended(ckpt, config)) return std::nullopt;
  const EarlyStoppingConfig& es = config.training.early_stopping;
  const int wait = int(std::min(ckpt.state_scalars.at("early_stopping_wait"), 1e9));
  spdlog::warn("EarlyStopping ended the run of {} at epoch {} ({} did not improve for {} epoch{}; patience {}); "
               "nothing to do: raise the EarlyStopping patience above {} to train further",
               path, ckpt.epoch, es.monitor, wait, wait == 1 ? "" : "s", es.patience, wait);
  done.stopped_early = true;
  return done;
}

}  // namespace

std::optional<FitResult> load_resume(const Checkpoint& ckpt, const std::string& path, const Config& config,
                                     Trainer& trainer, std::string& run_folder) {
  const Config then = stored_config(ckpt, path);
  run_folder = run_folder_of(path, then.training.model_checkpoint.filepath);
  trainer.load_weights(ckpt.weights, path);  // another model fails here, before any talk of settings
  if (!ckpt.state_scalars.count("optimizer_iterations")) {
    std::error_code ec;
    const std::filesystem::path last = std::filesystem::path(run_folder) / "last.h5";
    throw UserError(path + " holds no optimizer state (a weights-only file: final.h5, or a ModelCheckpoint file "
                           "with save_weights_only: true): continue its run with --resume " +
                    (std::filesystem::exists(last, ec) ? last.string() : std::string("its last.h5")) +
                    " (with a higher --epochs once it has finished), or, instead of --resume, start a new run from "
                    "its weights with --initial-weights " + path + " and another --output");
  }
  warn_differences(config, then, trainer, path);
  trainer.load_optimizer(ckpt, path);
  return nothing_left(ckpt, path, config);
}

}  // namespace trainer
