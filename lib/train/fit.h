#pragma once
// fit(): the Keras model.fit loop over a Trainer: epochs of shuffled global
// batches, validation, per-epoch logs (stdout and a CSV file), EarlyStopping
// and ModelCheckpoint, checkpoints that hold everything needed to resume, and
// a clean stop on request (SIGINT/SIGTERM) after the current step.
#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/crops.h"
#include "data/dataset.h"
#include "data/sample_stream.h"
#include "io/checkpoint.h"
#include "train/run_folder.h"
#include "train/trainer.h"

namespace trainer {

struct FitOptions {
  bool progress_bar = false;            ///< Redraw a progress bar on stdout (when it is a terminal).
  bool json = false;                    ///< One JSON object per epoch on stdout instead of text lines.
  const std::atomic<int>* stop = nullptr;  ///< When it becomes non-zero (a signal number), stop after the current step.
  /// The command that continues this run once " --resume <last.h5>" is
  /// appended, printed when a signal stops it: the run's own command line
  /// without --resume, --overwrite and --initial-weights (its -o, --images,
  /// --epochs... kept, which the checkpoint alone does not give back).
  /// "": the hint names --resume <last.h5> alone.
  std::string continue_command;
  /// Continue the run this checkpoint was saved from. The caller has already
  /// given the trainer its weights and optimizer state (Trainer::load_weights,
  /// Trainer::load_optimizer, before loading data, so a mismatch fails fast);
  /// fit restores the loop's own state: position, callbacks, epoch sums, log.
  const Checkpoint* resume = nullptr;
  std::string resume_path;              ///< Its path, for messages.
  /// Its run folder (run_folder_of): a run resumed into another folder
  /// starts its log with the rows of this folder's log.csv ("": the
  /// checkpoint's own folder, or the one holding its run files).
  std::string resume_run_folder;
  /// The pairs of data.validation_images / validation_masks (Keras's
  /// validation_data): every pair of the training Dataset then trains and
  /// these validate. nullptr: validation_split decides.
  const Dataset* validation = nullptr;
  /// The run's processes when several train together (an MPI launch; the
  /// Trainer's world); nullptr: this process alone. Every process runs fit
  /// alike (its decisions come from values summed over all towers, and a stop
  /// request is agreed each step), but only world rank 0 prints progress and
  /// writes files; FitResult is the same on every process.
  ProcessGroup* world = nullptr;
  /// Several processes: the training pairs, decoded per step, each process
  /// only its towers' samples (one step ahead, while the last trains); fit's
  /// `data` (and `validation`) then hold the pairs' names alone. The
  /// validation samples of its towers are decoded once and kept.
  /// validation_stream: the validation folders' pairs (with `validation`).
  SampleStream* stream = nullptr;
  SampleStream* validation_stream = nullptr;
};

struct FitResult {
  int epochs_run = 0;                        ///< Epochs completed (over the whole run, resumed ones included).
  bool stopped_early = false;                ///< EarlyStopping ended the run.
  int stop_signal = 0;                       ///< The signal that stopped the run (0: it ran to its end).
  std::map<std::string, double> last_logs;   ///< loss, metrics, val_* of the last epoch.
  std::vector<std::string> files;            ///< Files written, in order.
};

/// "continue with: <command>": the command that continues a stopped run from
/// its checkpoint last (FitOptions::continue_command, then --resume last),
/// to be run by each process under the launcher when the run has several.
std::string continue_with(const FitOptions& options, const std::string& last);


/// Writes that final.h5 (the trainer holds ckpt's weights) as the run would
/// have: ckpt's weights, or with restore_best_weights the best ones it kept.
/// Returns its path. Every process of world calls it; rank 0 writes. UserError
/// naming source (ckpt's path) when its best weights are not of the model.
std::string finish_ended_run(const Config& config, Trainer& trainer, const Checkpoint& ckpt, const std::string& source,
                             ProcessGroup* world);

/// Keras validation_split: the first int(N * (1 - split)) pairs (in name order)
/// train, the rest validate. Returns {train, validation} indices.
std::pair<std::vector<int>, std::vector<int>> split_validation(int n, double validation_split);

/// data.crop's crop ids (data/crops.h) of the training samples `train`:
/// i * per_image + d for each i and d < per_image, in that order. UserError
/// when they pass 2^31 - 1.
std::vector<int> crop_ids(const std::vector<int>& train, int per_image);

/// The order of the training samples in epoch (1-based; with
/// training.steps_per_epoch, in pass: each pass over the training set has the
/// order an epoch of that number would): train shuffled by a generator seeded
/// from (seed, epoch) when shuffle is set, so any epoch's order can be
/// recomputed when a run resumes.
std::vector<int> epoch_order(std::vector<int> train, uint64_t seed, int epoch, bool shuffle);



/// Trains for config.training.epochs (or until EarlyStopping or a stop
/// request), printing one Keras-style line per epoch. In training.output_dir
/// (created if missing; UserError when it cannot be) it writes:
///   log.csv     one row per epoch (Keras CSVLogger format); a resumed run first
///               keeps the rows of the epochs the checkpoint had finished
///   last.h5     the full state after every epoch and at a stop (for --resume)
///   the ModelCheckpoint filepath, when configured (full state too; the
///               weights, config and logs only with save_weights_only)
///   final.h5    the weights at the end, after restore_best_weights (not on a stop)
/// With options.resume, restores the position (epoch, step), callback state
/// and the unfinished epoch's sums first, so the run ends with
/// the weights an uninterrupted run would have (bit for bit on CPU with the
/// same tower and thread counts). Throws UserError for a checkpoint of another
/// model or optimizer, a diverged loss (naming epoch and step), and bad paths.
FitResult fit(const Config& config, Trainer& trainer, const Dataset& data, const FitOptions& options);

}  // namespace trainer
