#include "train/callbacks/registry.h"

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "train/callbacks.h"
#include "train/callbacks/early_stopping.h"
#include "train/trainer.h"

namespace trainer {

// The factories of the callbacks' own files.
std::unique_ptr<Callback> make_reduce_lr_on_plateau(const ReduceLROnPlateauConfig& cfg, Trainer& trainer);
std::unique_ptr<Callback> make_model_checkpoint(const ModelCheckpointConfig& cfg, const std::string& output_dir);
std::unique_ptr<Callback> make_tensorboard(const CallbackSetup& setup);
void check_model_checkpoint_files(const Config& config);
void check_tensorboard_files(const Config& config);

void check_callback_files(const Config& config) {
  check_model_checkpoint_files(config);
  check_tensorboard_files(config);
}

namespace {

/// Warns at where (a callback's mode in the config) when an explicit mode runs against its monitor: max on a
/// loss, min on a metric (every metric here is better when larger). Keras follows such a mode too, silently.
void warn_mode_against_monitor(const std::string& where, const std::string& monitor, MonitorMode mode) {
  if (mode == MonitorMode::Auto || monitor_is_max(monitor, mode) == monitor_is_max(monitor, MonitorMode::Auto)) return;
  const bool max = mode == MonitorMode::Max;
  spdlog::warn("{}: mode {} on {} takes the {} {} as the best, the worst one; use mode {} (or auto)", where,
               mode_name(mode), monitor, max ? "largest" : "smallest", monitor, max ? "min" : "max");
}

/// UserError naming config_path when monitor is a val_* value and the run has no validation samples.
void require_validation(const std::string& config_path, const std::string& monitor, bool validates) {
  if (monitor.rfind("val_", 0) == 0 && !validates)
    throw UserError(config_path + ": monitor '" + monitor +
                    "' needs validation data; set data.validation_split > 0 (or data.validation_images and "
                    "data.validation_masks) or monitor '" + monitor.substr(4) + "'");
}

/// Says once that callback `name` watching a val_* monitor sees it only on the epochs that validate, when
/// validation_freq skips some.
void note_sparse_validation(const char* name, const std::string& monitor, const TrainingConfig& tc) {
  if (monitor.rfind("val_", 0) != 0 || (tc.validation_freq == 1 && tc.validation_epochs.empty())) return;
  spdlog::info("{} watches {} after the epochs that validate (training.validation_freq) and skips the others, as "
               "Keras's does: its patience counts validated epochs", name, monitor);
}

}  // namespace

std::vector<std::unique_ptr<Callback>> make_callbacks(const CallbackSetup& setup) {
  const TrainingConfig& tc = setup.trainer->config().training;
  const std::string& path = setup.config->path;
  std::vector<std::unique_ptr<Callback>> out;
  if (const EarlyStoppingConfig& c = tc.early_stopping; c.enabled) {
    warn_mode_against_monitor(c.mode_where, c.monitor, c.mode);
    require_validation(path, c.monitor, setup.validates);
    note_sparse_validation("EarlyStopping", c.monitor, tc);
    out.push_back(std::make_unique<EarlyStoppingCallback>(c, *setup.trainer));
  }
  if (const ReduceLROnPlateauConfig& c = tc.reduce_lr; c.enabled) {
    warn_mode_against_monitor(c.mode_where, c.monitor, c.mode);
    require_validation(path, c.monitor, setup.validates);
    note_sparse_validation("ReduceLROnPlateau", c.monitor, tc);
    out.push_back(make_reduce_lr_on_plateau(c, *setup.trainer));
  }
  if (const ModelCheckpointConfig& c = tc.model_checkpoint; c.enabled) {
    if (c.save_best_only) {
      warn_mode_against_monitor(c.mode_where, c.monitor, c.mode);
      require_validation(path, c.monitor, setup.validates);
    }
    out.push_back(make_model_checkpoint(c, setup.output_dir));
  }
  if (tc.tensorboard.enabled && setup.voice) out.push_back(make_tensorboard(setup));
  return out;
}

std::unique_ptr<Callback> ended_run_early_stopping(const Config& config, Trainer& trainer,
                                                   const Checkpoint& ckpt, const std::string& source) {
  if (!config.training.early_stopping.enabled) return nullptr;
  auto early = std::make_unique<EarlyStoppingCallback>(config.training.early_stopping, trainer);
  early->restore_ended(StateReader(ckpt, source), ckpt.epoch);
  return early;
}

}  // namespace trainer
