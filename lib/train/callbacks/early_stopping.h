#pragma once
// EarlyStoppingCallback: Keras's EarlyStopping as a Callback (early_stopping.cpp).
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "train/callback.h"
#include "train/callbacks.h"

namespace trainer {

class EarlyStoppingCallback final : public Callback {
 public:
  EarlyStoppingCallback(const EarlyStoppingConfig& cfg, Trainer& trainer);
  /// Stops the run (EpochEnd::stop, with the reason) as EarlyStopping decides
  /// on logs[monitor]; with restore_best_weights keeps tower 0's weights and
  /// the logs of each new best epoch.
  void on_epoch_end(EpochEnd& e) override;
  /// With restore_best_weights and best weights kept: puts them into trainer,
  /// and their epoch and logs into final (kept weights without logs: the last
  /// epoch's stay).
  void on_train_end(Trainer& trainer, Checkpoint& final) override;
  void save_state(Checkpoint& c) const override;
  void restore_state(const StateReader& r) override;
  /// For a run that ended before final.h5: the kept best weights and the
  /// best epoch when it lies in 1..epochs, else none (the checkpoint's own
  /// weights go into final.h5).
  void restore_ended(const StateReader& r, int epochs);

 private:
  /// The kept best weights and their logs, when r's checkpoint holds them.
  void restore_best(const StateReader& r);

  EarlyStoppingConfig cfg_;
  EarlyStopping early_;
  Trainer& trainer_;
  bool stopped_ = false;                        ///< It ended the run at the last finished epoch.
  std::vector<float> best_params_, best_state_;  ///< For restore_best_weights.
  std::map<std::string, double> best_logs_;     ///< Their epoch's logs ({} in older checkpoints).
};

}  // namespace trainer
