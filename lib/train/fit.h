#pragma once
// fit(): the Keras model.fit loop over a Trainer: epochs of shuffled global
// batches, validation, per-epoch logs, EarlyStopping and ModelCheckpoint, and
// a final checkpoint.
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/dataset.h"
#include "train/trainer.h"

namespace trainer {

struct FitOptions {
  bool progress_bar = false;    ///< Redraw a progress bar on stdout (when it is a terminal).
};

struct FitResult {
  int epochs_run = 0;
  bool stopped_early = false;
  std::map<std::string, double> last_logs;   ///< loss, metrics, val_* of the last epoch.
  std::vector<std::string> files;            ///< Checkpoints written, in order.
};

/// Keras validation_split: the last floor(N * split) pairs (in name order)
/// validate, the rest train. Returns {train, validation} indices.
std::pair<std::vector<int>, std::vector<int>> split_validation(int n, double validation_split);

/// Trains for config.training.epochs (or until EarlyStopping), printing one
/// Keras-style line per epoch to stdout; writes checkpoints under
/// training.output_dir (created if missing; UserError when it cannot be).
/// Files: the ModelCheckpoint filepath (if configured) and final.h5 (the weights
/// at the end, after restore_best_weights).
FitResult fit(const Config& config, Trainer& trainer, const Dataset& data, const FitOptions& options);

}  // namespace trainer
