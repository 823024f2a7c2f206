// EarlyStopping (Keras's keras.callbacks.EarlyStopping): train/callbacks.h's
// decision each epoch, and with restore_best_weights the best epoch's weights,
// put back before final.h5 is written.
//
// training_state keys: early_stopping_best, early_stopping_best_epoch,
// early_stopping_wait; early_stopped (1 in the checkpoints of the epoch that
// ended the run); best_params and best_state (float arrays) with
// best_log_<name> (the logs of their epoch).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "train/callbacks.h"
#include "train/callbacks/early_stopping.h"
#include "train/trainer.h"

namespace trainer {

namespace {

constexpr const char* kBestLogPrefix = "best_log_";

}  // namespace

EarlyStoppingCallback::EarlyStoppingCallback(const EarlyStoppingConfig& cfg, Trainer& trainer)
    : cfg_(cfg), early_(cfg), trainer_(trainer) {
  const TrainingConfig& tc = trainer.config().training;
  int first = std::max(cfg.start_from_epoch, tc.initial_epoch) + 1;
  if (cfg.monitor.rfind("val_", 0) == 0)
    while (first < tc.epochs && !tc.validates(first)) ++first;
  early_.watch_from(first);
}

void EarlyStoppingCallback::on_epoch_end(EpochEnd& e) {
  stopped_ = false;
  const auto value = e.logs.find(cfg_.monitor);
  if (value == e.logs.end()) return;  // an epoch without validation (validation_freq): not watched, as in Keras
  stopped_ = early_.on_epoch_end(e.epoch, value->second);
  if (early_.improved() && cfg_.restore_best_weights) {
    best_params_ = trainer_.params(0);
    best_state_ = trainer_.state(0);
    best_logs_ = e.logs;
  }
  if (!stopped_) return;
  e.stop = true;
  const int wait = early_.wait();  // watched epochs without improvement: patience's, or more after a resume
  const std::string waited = std::to_string(wait) + (wait == 1 ? " epoch" : " epochs");
  e.stop_message =
      early_.below_baseline()
          ? fmt::format("early stopping at epoch {}: {} did not beat the baseline {:g} in {} (best {:.4f} at epoch {})",
                        e.epoch, cfg_.monitor, *cfg_.baseline, waited, early_.best(), early_.best_epoch())
          : fmt::format("early stopping at epoch {}: {} did not improve for {} (best {:.4f} at epoch {})", e.epoch,
                        cfg_.monitor, waited, early_.best(), early_.best_epoch());
}

void EarlyStoppingCallback::on_train_end(Trainer& trainer, Checkpoint& final) {
  if (!cfg_.restore_best_weights || best_params_.empty()) return;
  spdlog::info("restoring the weights of epoch {} (best {})", early_.best_epoch(), cfg_.monitor);
  trainer.set_weights(best_params_, best_state_);
  if (!best_logs_.empty()) {  // final.h5 then says which epoch its weights are of, with that epoch's logs
    final.epoch = early_.best_epoch();
    final.logs = best_logs_;
  }
}

void EarlyStoppingCallback::save_state(Checkpoint& c) const {
  c.state_scalars["early_stopping_best"] = early_.best();
  c.state_scalars["early_stopping_best_epoch"] = early_.best_epoch();
  c.state_scalars["early_stopping_wait"] = early_.wait();
  if (stopped_) c.state_scalars["early_stopped"] = 1;
  if (best_params_.empty()) return;
  c.state_arrays["best_params"] = best_params_;
  c.state_arrays["best_state"] = best_state_;
  for (const auto& [name, value] : best_logs_) c.state_scalars[kBestLogPrefix + name] = value;
}

void EarlyStoppingCallback::restore_state(const StateReader& r) {
  if (r.has("early_stopping_best"))
    early_.restore(r.scalar("early_stopping_best"), r.count("early_stopping_best_epoch", -1),
                   r.count("early_stopping_wait", 0));
  restore_best(r);
}

void EarlyStoppingCallback::restore_best(const StateReader& r) {
  const Checkpoint& c = r.checkpoint();
  if (!c.state_arrays.count("best_params")) return;
  for (const auto& [key, value] : c.state_scalars)
    if (key.rfind(kBestLogPrefix, 0) == 0) best_logs_[key.substr(std::strlen(kBestLogPrefix))] = value;
  best_params_ = c.state_arrays.at("best_params");
  const auto st = c.state_arrays.find("best_state");
  best_state_ = st == c.state_arrays.end() ? std::vector<float>{} : st->second;
  const Model& m = trainer_.model();
  if (best_params_.size() != m.num_params() || best_state_.size() != m.num_state())
    r.damaged("the kept best weights (training_state/best_params, best_state) hold " +
              std::to_string(best_params_.size()) + " + " + std::to_string(best_state_.size()) + " values, the model " +
              std::to_string(m.num_params()) + " + " + std::to_string(m.num_state()));
}

void EarlyStoppingCallback::restore_ended(const StateReader& r, int epochs) {
  restore_best(r);
  const Checkpoint& c = r.checkpoint();
  const auto best = c.state_scalars.find("early_stopping_best");
  const auto best_epoch = c.state_scalars.find("early_stopping_best_epoch");
  if (best != c.state_scalars.end() && best_epoch != c.state_scalars.end() && best_epoch->second >= 1 &&
      best_epoch->second <= epochs)
    early_.restore(best->second, int(best_epoch->second), 0);
  else
    best_params_.clear();  // no best epoch to name: the checkpoint's own weights
}

}  // namespace trainer
