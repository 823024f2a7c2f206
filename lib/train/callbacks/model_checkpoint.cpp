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

std::unique_ptr<Callback> make_model_checkpoint(const ModelCheckpointConfig& cfg, const std::string& output_dir) {
  return std::make_unique<ModelCheckpointCallback>(cfg, output_dir);
}

}  // namespace trainer
