#pragma once
// The callbacks of a run (train/callback.h), made from training.callbacks:
// the one place that knows them by name. Adding a callback: its file here,
// a line in make_callbacks, its test.
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "train/callback.h"

namespace trainer {

class Trainer;

/// What the callbacks of a run need to know about it.
struct CallbackSetup {
  const Config* config = nullptr;
  Trainer* trainer = nullptr;      ///< Its config() holds the batch and learning rate resolved for the towers.
  bool voice = true;               ///< This process prints and writes (world rank 0).
  bool validates = false;          ///< The run has validation samples (val_* logs).
  std::string output_dir;
  /// A resumed run: the folder of the run its checkpoint belongs to
  /// (run_folder_of) and the log.csv holding that run's rows ("": none).
  bool resumed = false;
  std::string resume_run_folder, earlier_log;
};

/// EarlyStopping, ReduceLROnPlateau, ModelCheckpoint and (on the voice only)
/// TensorBoard, as training.callbacks enables them, in that order (the order
/// of their hooks). Warns of a mode that runs against its monitor. UserError
/// naming the config when a monitor is a val_* value and the run has no
/// validation samples.
std::vector<std::unique_ptr<Callback>> make_callbacks(const CallbackSetup& setup);

/// Checks the files the callbacks of config would write, for a training run
/// (train, summary) only: a checkpoint's stored config is never refused for
/// them, so predict, evaluate and export read checkpoints of any run. Throws
/// UserError naming the config place and the fix when the ModelCheckpoint
/// filepath names an unknown placeholder or is (or lies in) one of the run's
/// own files (log.csv, last.h5, final.h5), or the TensorBoard log_dir is (or
/// lies in) one of them or the ModelCheckpoint file.
void check_callback_files(const Config& config);

/// The EarlyStopping of a run that ended (its epochs done) before writing
/// final.h5, restored from its last.h5 ckpt (read from source): its best
/// weights when it kept some for restore_best_weights and names their epoch
/// (1..ckpt.epoch), for on_train_end. nullptr without EarlyStopping. UserError
/// naming source when the kept weights are not of the trainer's model.
std::unique_ptr<Callback> ended_run_early_stopping(const Config& config, Trainer& trainer,
                                                   const Checkpoint& ckpt, const std::string& source);

}  // namespace trainer
