// ModelCheckpoint (Keras's keras.callbacks.ModelCheckpoint): after each epoch,
// or with save_best_only after each new best, the epoch's checkpoint to
// filepath (format_filepath, relative to the output folder): the full state
// (a run resumes from it), or with save_weights_only the config, epoch, logs
// and weights only. Written before last.h5, which holds its state.
//
// training_state key: checkpoint_best.
#include <spdlog/spdlog.h>

#include <filesystem>

#include "core/error.h"
#include "train/callbacks.h"
#include "train/callbacks/registry.h"
#include "train/run_folder.h"

namespace trainer {

namespace {

namespace fs = std::filesystem;

/// c without its training state: the config, epoch, logs and weights, which
/// predict, evaluate and export read and --resume refuses (as Keras's weights files).
Checkpoint weights_only(Checkpoint c) {
  c.state_scalars.clear();
  c.state_arrays.clear();
  c.state_double_arrays.clear();
  return c;
}

class ModelCheckpointCallback final : public Callback {
 public:
  ModelCheckpointCallback(const ModelCheckpointConfig& cfg, std::string output_dir)
      : cfg_(cfg), policy_(cfg), out_(std::move(output_dir)) {}

  void on_epoch_end(EpochEnd& e) override {
    // An epoch without validation (validation_freq) has no val_* value to compare or to name the file with:
    // no save. Keras 3 saves then with a warning (save_best_only), overwriting the best model with one it
    // could not compare, or fails on the file name.
    const bool validated = e.logs.count("val_loss") > 0;
    if (!validated && (cfg_.filepath.find("{val_") != std::string::npos ||
                       (cfg_.save_best_only && cfg_.monitor.rfind("val_", 0) == 0)))
      return;
    if (cfg_.save_best_only && !policy_.should_save(e.logs.at(cfg_.monitor))) return;
    std::string name;
    try {
      name = format_filepath(cfg_.filepath, e.epoch, e.logs);
    } catch (const UserError& error) {
      throw UserError(cfg_.where + ": " + error.what() + " (" + (out_ / "last.h5").string() +
                      " holds the epoch before)");
    }
    saved_ = (out_ / name).string();
    const Checkpoint& c = e.checkpoint();  // after should_save: it holds the new best
    e.save(saved_, cfg_.save_weights_only ? weights_only(c) : c);
  }

  void on_epoch_logged(EpochEnd& e) override {
    if (!saved_.empty()) spdlog::info("epoch {}: saved {}", e.epoch, saved_);
    saved_.clear();
  }

  void save_state(Checkpoint& c) const override { c.state_scalars["checkpoint_best"] = policy_.best(); }

  void restore_state(const StateReader& r) override {
    if (r.has("checkpoint_best")) policy_.restore(r.scalar("checkpoint_best"));
  }

 private:
  ModelCheckpointConfig cfg_;
  CheckpointPolicy policy_;
  fs::path out_;
  std::string saved_;  ///< The epoch's file, said after its line.
};

}  // namespace

void check_model_checkpoint_files(const Config& config) {
  const ModelCheckpointConfig& mc = config.training.model_checkpoint;
  if (mc.enabled) {
    // The names an epoch's logs will hold: val_* only with validation data.
    const bool validates = config.data.has_validation();
    std::map<std::string, double> logs{{"loss", 0.0}};
    if (validates) logs["val_loss"] = 0.0;
    for (const auto& m : config.training.metrics) {
      logs[m] = 0.0;
      if (validates) logs["val_" + m] = 0.0;
    }
    if (config.training.reduce_lr.enabled || config.training.optimizer.schedule.type != ScheduleKind::None)
      logs["learning_rate"] = 0.0;
    std::string name;
    try {
      name = format_filepath(mc.filepath, 1, logs);
    } catch (const UserError& e) {  // an unknown placeholder or a bad spec: say where
      throw UserError(mc.where + ": " + e.what());
    }
    const std::filesystem::path first = *std::filesystem::path(name).lexically_normal().begin();
    for (const char* own : kRunFiles)
      if (first == own)
        throw UserError(mc.where + ": filepath '" + mc.filepath + "' is (or lies in) the run's own " + own +
                        ", which the checkpoint would overwrite (or be overwritten by); choose another name, e.g. "
                        "'best.h5'");
  }
}

std::unique_ptr<Callback> make_model_checkpoint(const ModelCheckpointConfig& cfg, const std::string& output_dir) {
  return std::make_unique<ModelCheckpointCallback>(cfg, output_dir);
}

}  // namespace trainer
