#pragma once
// The decisions of Keras's EarlyStopping and ModelCheckpoint callbacks, and
// ModelCheckpoint's filepath formatting. No file IO here: the training loop
// acts on the answers.
#include <map>
#include <optional>
#include <string>

#include "config/config.h"

namespace trainer {

/// Keras's mode resolution: Max -> true, Min -> false; Auto -> false when the
/// monitor's name contains "loss", else true when it contains "acc", "iou", "dice",
/// "precision" or "recall" (tf.keras uses "acc" only; the others are this tool's
/// maximised metrics), else false.
bool monitor_is_max(const std::string& monitor, MonitorMode mode);

/// keras.callbacks.EarlyStopping's decision (Keras 3 on_epoch_end): epochs up
/// to start_from_epoch are not watched; on every other epoch the wait counter
/// grows by 1; an epoch improves when its value beats the best by more than
/// min_delta (value < best - |min_delta| for min, value > best + |min_delta|
/// for max), which sets the best and resets the wait to 0 (with a baseline only
/// when the value also beats the baseline by min_delta), and never stops the
/// run; training stops at the first non-improving epoch where wait >= patience,
/// so patience 0 stops at the first epoch without improvement, and with a
/// baseline never beaten the earliest stop is the patience-th watched epoch,
/// the second at the earliest (the first one from there on that does not
/// improve). The first watched epoch counts as an improvement whatever its
/// value, as in Keras (whose best starts as None): it resets the wait (without
/// a baseline) and never stops the run. One difference: a NaN never becomes
/// the best here (in Keras a first NaN does, and nothing beats it afterwards).
class EarlyStopping {
 public:
  explicit EarlyStopping(const EarlyStoppingConfig& cfg);
  /// Records the monitor's value of epoch (1-based, as the log numbers epochs;
  /// Keras's start_from_epoch counts from 0, so its epochs < start_from_epoch are
  /// these <= start_from_epoch). Returns true when training should stop after it.
  bool on_epoch_end(int epoch, double value);
  /// Whether the last on_epoch_end() epoch was a new best.
  bool improved() const { return improved_; }
  /// Whether a baseline is set and the best so far has not beaten it (what a stop then means).
  bool below_baseline() const;
  /// Epoch of the best value so far (-1 before any improvement).
  int best_epoch() const { return best_epoch_; }
  /// Best value so far (+inf for min, -inf for max before any epoch).
  double best() const { return best_; }
  /// The wait counter: watched epochs since the last improvement (with a
  /// baseline, since the last one that also beat the baseline).
  int wait() const { return wait_; }
  /// The first epoch whose value it sees (default start_from_epoch + 1): a
  /// later one when the run starts later (initial_epoch) or the monitor is
  /// a val_* value that validation_freq skips there. That epoch counts as an
  /// improvement whatever its value, as Keras's best starts as None (a NaN
  /// still does not become the best).
  void watch_from(int epoch) { first_watched_ = epoch; }
  /// Sets the state saved from best(), best_epoch() and wait() (resuming a run).
  void restore(double best, int best_epoch, int wait) {
    best_ = best;
    best_epoch_ = best_epoch;
    wait_ = wait;
  }

 private:
  /// value beats reference by more than min_delta in the monitor's direction.
  bool beats(double value, double reference) const;

  bool max_;
  double min_delta_;
  int patience_;
  std::optional<double> baseline_;
  int start_from_epoch_;
  int first_watched_;
  double best_;
  int best_epoch_ = -1;
  int wait_ = 0;
  bool improved_ = false;
};

/// tf.keras.callbacks.ModelCheckpoint's decision: save every epoch, or with
/// save_best_only only when the monitor improves on the best so far (any
/// improvement, no min_delta, as Keras).
class CheckpointPolicy {
 public:
  explicit CheckpointPolicy(const ModelCheckpointConfig& cfg);
  /// Whether to save after an epoch whose monitor is value; updates best(). NaN never improves.
  bool should_save(double value);
  /// Best value so far (+inf for min, -inf for max before any epoch).
  double best() const { return best_; }
  /// Sets the state saved from best() (resuming a run).
  void restore(double best) { best_ = best; }

 private:
  bool save_best_only_;
  bool max_;
  double best_;
};

/// tf.keras.callbacks.ReduceLROnPlateau's decision (Keras 2.x/3.x
/// on_epoch_end): an epoch improves when its value beats the best by more
/// than min_delta (as EarlyStopping); during the cooldown epochs after a
/// reduction the wait counter stays 0 (the last one, whose decrement ends
/// the cooldown, counts again, as in Keras); otherwise each epoch without
/// improvement increments it, and at wait >= patience the learning rate
/// becomes max(lr * factor, min_lr), provided lr > min_lr (compared in
/// float32, as Keras), and the cooldown starts. A NaN value never improves
/// (unlike Keras, which takes any first value, NaN too, as the best).
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(const ReduceLROnPlateauConfig& cfg);
  /// Records the monitor's value of an epoch trained at learning rate lr;
  /// returns the learning rate of the next epoch (lr, or the reduced one).
  double on_epoch_end(double value, double lr);
  /// Best value so far (+inf for min, -inf for max before any epoch).
  double best() const { return best_; }
  /// Epochs without improvement counted so far.
  int wait() const { return wait_; }
  /// Cooldown epochs left.
  int cooldown_left() const { return cooldown_left_; }
  /// Sets the state saved from best(), wait() and cooldown_left() (resuming a run).
  void restore(double best, int wait, int cooldown_left) {
    best_ = best;
    wait_ = wait;
    cooldown_left_ = cooldown_left;
  }

 private:
  ReduceLROnPlateauConfig cfg_;
  bool max_;
  double best_;
  int wait_ = 0, cooldown_left_ = 0;
};

/// Keras/Python str.format-style filepath formatting, as ModelCheckpoint's
/// filepath.format(epoch=epoch + 1, **logs): "{epoch}", "{epoch:03d}",
/// "{val_loss:.4f}", "{val_mean_iou:.3f}"; "{{" and "}}" are literal braces.
/// epoch is 1-based (the number printed). Supported specs: [0][width][.precision](d|f),
/// d for the epoch only (as Python, which rejects d for floats); no spec prints a
/// float as Python's repr (shortest round-trip, e.g. 0.25, 1.0).
/// Throws UserError naming the pattern and the placeholder when a name is unknown
/// (listing the known ones), a spec is unsupported, or a brace is unmatched.
std::string format_filepath(const std::string& pattern, int epoch, const std::map<std::string, double>& logs);

}  // namespace trainer
