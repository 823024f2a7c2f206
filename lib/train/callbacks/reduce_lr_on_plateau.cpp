// ReduceLROnPlateau (Keras's keras.callbacks.ReduceLROnPlateau): train/callbacks.h's
// decision each epoch, applied to the optimizer of every tower.
//
// training_state keys: reduce_lr_learning_rate (the rate in use),
// reduce_lr_initial_rate (training.optimizer.learning_rate as resolved for
// the towers), reduce_lr_best, reduce_lr_wait, reduce_lr_cooldown.
#include <spdlog/spdlog.h>

#include "train/callbacks.h"
#include "train/callbacks/registry.h"
#include "train/trainer.h"

namespace trainer {

namespace {

class ReduceLROnPlateauCallback final : public Callback {
 public:
  ReduceLROnPlateauCallback(const ReduceLROnPlateauConfig& cfg, Trainer& trainer)
      : cfg_(cfg), reduce_(cfg), trainer_(trainer) {}

  /// learning_rate: the rate this epoch trained at, as Keras 3 logs it.
  void add_logs(std::map<std::string, double>& logs) const override { logs["learning_rate"] = trainer_.learning_rate(); }

  void on_epoch_end(EpochEnd& e) override {
    const auto value = e.logs.find(cfg_.monitor);
    if (value == e.logs.end()) return;  // an epoch without validation (validation_freq): not watched, as in Keras
    const double lr = trainer_.learning_rate(), next = reduce_.on_epoch_end(value->second, lr);
    if (next == lr) return;
    trainer_.set_learning_rate(next);
    message_ = fmt::format("epoch {}: ReduceLROnPlateau: {} did not improve (patience {}); learning rate {:g} -> {:g}",
                           e.epoch, cfg_.monitor, cfg_.patience, lr, next);
  }

  void on_epoch_logged(EpochEnd&) override {
    if (!message_.empty()) spdlog::info("{}", message_);
    message_.clear();
  }

  void save_state(Checkpoint& c) const override {
    c.state_scalars["reduce_lr_learning_rate"] = trainer_.learning_rate();
    c.state_scalars["reduce_lr_initial_rate"] = trainer_.config().training.optimizer.learning_rate;  // as scaled
    c.state_scalars["reduce_lr_best"] = reduce_.best();
    c.state_scalars["reduce_lr_wait"] = reduce_.wait();
    c.state_scalars["reduce_lr_cooldown"] = reduce_.cooldown_left();
  }

  /// The reductions so far carry over; a learning_rate changed in the config
  /// since (warned about) scales with them: rate * (configured now / configured then).
  void restore_state(const StateReader& r) override {
    if (!r.has("reduce_lr_learning_rate")) return;
    const double rate = r.scalar("reduce_lr_learning_rate", 0, 1e300);
    const double then = r.scalar("reduce_lr_initial_rate", 1e-300, 1e300), now = trainer_.learning_rate();
    trainer_.set_learning_rate(now == then ? rate : rate * (now / then));
    if (now != then)
      spdlog::warn("ReduceLROnPlateau: the carried learning rate {:g} becomes {:g} (learning_rate is {:g}, was {:g})",
                   rate, trainer_.learning_rate(), now, then);
    reduce_.restore(r.scalar("reduce_lr_best"), r.count("reduce_lr_wait", 0), r.count("reduce_lr_cooldown", 0));
  }

 private:
  ReduceLROnPlateauConfig cfg_;
  ReduceLROnPlateau reduce_;
  Trainer& trainer_;
  std::string message_;  ///< The epoch's reduction, said after its line.
};

}  // namespace

std::unique_ptr<Callback> make_reduce_lr_on_plateau(const ReduceLROnPlateauConfig& cfg, Trainer& trainer) {
  return std::make_unique<ReduceLROnPlateauCallback>(cfg, trainer);
}

}  // namespace trainer
