#pragma once
// The TensorBoard callback (keras.callbacks.TensorBoard, Keras 3): the run's
// losses, metrics, learning rate and weight histograms as event files that
// `tensorboard --logdir <output_dir>` shows. As Keras: the training values in
// <log_dir>/train, the validation values (their val_ prefix dropped, so that
// loss and val_loss share one chart) in <log_dir>/validation, scalars named
// epoch_<name> at the epoch counted from 0, and with update_freq batch_<name>
// at the step. World rank 0 alone writes (fit).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "io/checkpoint.h"
#include "io/event_file.h"

namespace trainer {

/// What a run's TensorBoard folder starts from.
struct TensorBoardStart {
  /// For a resumed run, the event folder (run folder / log_dir) of the run
  /// its checkpoint belongs to (the output folder itself when resumed in
  /// place); "" for a new run.
  std::string resumed_from;
  int epochs_done = 0;          ///< Epochs that run had finished at the checkpoint.
  int64_t iterations_done = 0;  ///< Its optimizer steps at the checkpoint.
  /// That run's log.csv loss by epoch (0-based), to tell its event files from
  /// those of a run that --overwrite replaced there (whose event files it left:
  /// it had no TensorBoard callback, or another log_dir); empty: not checked.
  std::map<int64_t, double> losses;
};

/// Whether the event files in root's train/ or validation/ hold a value of a
/// finished epoch (an epoch_ value or a histogram, not only batch values):
/// TensorBoard's record of a run, as log.csv is one. A run that failed within
/// its first epoch leaves none, and its rerun may replace its files.
bool holds_epoch_values(const std::string& root);

/// The folders below output_dir (4 levels at most) holding TensorBoard
/// event files, other than tc's TensorBoard log_dir's train/ and validation/
/// (all of them when tc has no TensorBoard callback), in name order: an
/// earlier run's that a run with --overwrite leaves, which
/// `tensorboard --logdir output_dir` would show beside it.
std::vector<std::string> other_event_folders(const std::string& output_dir, const TrainingConfig& tc);

class TensorBoardLogger {
 public:
  /// Writes under folder root (output_dir / log_dir), in one new file per
  /// folder, as log.csv is kept: a new run's folders start empty; a resumed
  /// run's start with the events of start.resumed_from up to the checkpoint
  /// (epoch values of its first epochs_done epochs, batch values up to step
  /// iterations_done; one value per tag and step, a later file's over an
  /// earlier's; a record cut short ends a file), so that TensorBoard shows
  /// neither the epochs a branch drops nor the steps after a crash twice. The
  /// new files are written and synced before the earlier event files in
  /// root's train/ and validation/ are removed (said at info level): a
  /// failure in between loses none. A file with a record that fails its
  /// checksum is carried up to it, said in a warning, and kept (renamed so
  /// that TensorBoard no longer reads it, when it is in root). Both folders
  /// are made at once. When a carried epoch_loss differs from start.losses
  /// (relative 1e-4), the files are another run's: nothing is carried, and a
  /// warning says so. The train/ file is made at once, so that
  /// a folder that cannot be written fails before the first step (UserError
  /// naming it, from EventFileWriter).
  TensorBoardLogger(const std::string& root, const TensorBoardConfig& cfg, const TensorBoardStart& start);

  /// Writes graph_def (a serialized GraphDef, model_graph_def) into train/,
  /// where TensorBoard's Graphs tab shows it (Keras's write_graph). Throws
  /// UserError when the write fails.
  void graph(const std::string& graph_def);

  /// Whether on_train_batch_end writes at iteration: with update_freq N, on
  /// the multiples of N (so that the caller builds the logs only then).
  bool wants_batch(int64_t iteration) const;

  /// After a training step: with update_freq N, when iteration (the
  /// optimizer's steps so far, counted over resumes) is a multiple of N,
  /// writes batch_<name> for each of logs (the loss and metrics over the
  /// epoch's steps so far, as Keras's batch logs) at step iteration, and with
  /// write_steps_per_second batch_steps_per_second (1 / step_seconds, that
  /// step's time in seconds). Throws UserError when a write fails.
  void on_train_batch_end(int64_t iteration, const std::map<std::string, double>& logs, double step_seconds);

  /// Whether on_epoch_end wants the weights after epoch (1-based): every
  /// histogram_freq epochs, from the first (Keras's epoch % histogram_freq == 0, counted from 0).
  bool wants_weights(int epoch) const;

  /// After epoch (1-based; written at step epoch - 1, as Keras), iteration
  /// the optimizer's steps so far: epoch_<name> for each of logs (val_ ones
  /// into validation/, where Keras 3's evaluation_<name>_vs_iterations at
  /// step iteration join them; logs' learning_rate left out), then
  /// epoch_learning_rate = learning_rate (fit gives log.csv's learning_rate
  /// where the logs hold one, else the rate of the optimizer), with
  /// write_steps_per_second epoch_steps_per_second, and when
  /// wants_weights(epoch) a histogram "<layer>/<weight>/histogram" of each of
  /// weights (e.g. "conv2d_1/kernel/histogram"). Throws UserError when a write fails.
  void on_epoch_end(int epoch, int64_t iteration, const std::map<std::string, double>& logs, double learning_rate,
                    double steps_per_second, const std::vector<WeightRecord>& weights);

  /// The folder written to (root).
  const std::string& folder() const { return root_; }

 private:
  /// The validation/ writer, made when first needed.
  EventFileWriter& validation();

  std::string root_;
  TensorBoardConfig cfg_;
  std::unique_ptr<EventFileWriter> train_, validation_;
};

}  // namespace trainer
