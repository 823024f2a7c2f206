#pragma once
// Callback: the one interface of fit()'s callbacks, as Keras's
// keras.callbacks.Callback. Each callback (train/callbacks/: EarlyStopping,
// ReduceLROnPlateau, ModelCheckpoint, TensorBoard) owns its hooks and its
// state in the checkpoint, under its own training_state keys; fit() knows
// none of them by name. fit() calls every callback, in make_callbacks's
// order, at:
//   on_train_begin      once the output folder is ready, before the first step;
//   on_train_batch_end  after each training step;
//   add_logs            when an epoch's logs are gathered (entries of its own);
//   on_epoch_end        once an epoch's logs are known and before last.h5 is
//                       written: decisions (stop, the learning rate, a
//                       checkpoint file of its own), so that last.h5 holds
//                       their state;
//   on_epoch_logged     after last.h5, the log.csv row and the epoch's line:
//                       what a script seeing the line may already read, and
//                       messages about the epoch;
//   on_train_end        before final.h5 is written (its weights may change).
// save_state and restore_state carry the state across --resume.
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace trainer {

class Trainer;

/// The end of the message for training state in a checkpoint that no run writes.
inline constexpr const char* kDamagedState = "; the file is damaged or was edited: resume from another checkpoint";

/// Reads a checkpoint's training_state for restore_state, checking each value
/// against what a run writes. Every error is a UserError naming source (the
/// checkpoint's path), the key and the fix.
class StateReader {
 public:
  StateReader(const Checkpoint& c, std::string source) : c_(c), source_(std::move(source)) {}
  const Checkpoint& checkpoint() const { return c_; }
  const std::string& source() const { return source_; }
  /// Whether the scalar attribute `name` is present.
  bool has(const std::string& name) const { return c_.state_scalars.count(name) > 0; }
  /// The scalar `name`, in [lo, hi] and not NaN. UserError when it is missing or out of range.
  double scalar(const std::string& name, double lo = -HUGE_VAL, double hi = HUGE_VAL) const;
  /// The scalar `name` as a whole number in [lo, 2^30]. UserError otherwise.
  int count(const std::string& name, int lo) const;
  /// UserError "<source>: <what>; the file is damaged or was edited: resume from another checkpoint".
  [[noreturn]] void damaged(const std::string& what) const;

 private:
  const Checkpoint& c_;
  std::string source_;
};

/// What the callbacks see at an epoch's end, and what they tell fit().
struct EpochEnd {
  int epoch = 0;                          ///< 1-based.
  std::map<std::string, double>& logs;    ///< loss, metrics, val_*, learning_rate of the epoch.
  Trainer& trainer;
  /// The epoch's full checkpoint (weights, optimizer, every callback's
  /// save_state), built at the first call, after the decisions of the
  /// callbacks before the caller; fit() writes the same one as last.h5.
  std::function<const Checkpoint&()> checkpoint;
  /// Writes a checkpoint to a path (its folder created; every process checks
  /// it for NaN, rank 0 writes) and records it among the run's files.
  std::function<void(const std::string& path, const Checkpoint&)> save;
  /// Records a file or folder the callback wrote among the run's files.
  std::function<void(const std::string& path)> remember;
  int64_t iterations = 0;                 ///< The optimizer's steps so far.
  double steps_per_second = 0;            ///< Of the epoch's training steps.
  bool stop = false;                      ///< Set by a callback: training ends after this epoch.
  std::string stop_message;               ///< Why, said once the epoch is logged.
};

/// Where the run starts (after a resume: where it continues).
struct TrainBegin {
  int epochs_done = 0;                    ///< Epochs finished before this run's first step.
  int64_t iterations = 0;                 ///< The optimizer's steps so far.
};

/// What the callbacks see after a training step.
struct BatchEnd {
  int64_t iterations = 0;                 ///< The optimizer's steps so far, this one included.
  /// The loss and metrics over the epoch's steps so far (built only when called).
  std::function<std::map<std::string, double>()> logs;
  double seconds = 0;                     ///< The step's wall time.
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(const TrainBegin& b) { (void)b; }
  virtual void on_train_batch_end(const BatchEnd& b) { (void)b; }
  /// Adds the callback's entries to an epoch's logs, before any on_epoch_end
  /// (Keras's ReduceLROnPlateau adds learning_rate).
  virtual void add_logs(std::map<std::string, double>& logs) const { (void)logs; }
  virtual void on_epoch_end(EpochEnd& e) { (void)e; }
  virtual void on_epoch_logged(EpochEnd& e) { (void)e; }
  /// Before final.h5 is written from the trainer's weights: `final` holds the
  /// last epoch and its logs, and may be changed with the weights.
  virtual void on_train_end(Trainer& trainer, Checkpoint& final) { (void)trainer, (void)final; }
  /// Adds the callback's state to c.state_* under its own keys.
  virtual void save_state(Checkpoint& c) const { (void)c; }
  /// Restores what save_state wrote (a checkpoint without it: nothing).
  /// UserError through r for state that no run writes.
  virtual void restore_state(const StateReader& r) { (void)r; }
};

}  // namespace trainer
