#include "config/callbacks/callback_reader.h"

namespace trainer {

void read_reduce_lr_on_plateau(const CallbackInput& in, TrainingConfig& t) {
  ParamReader& p = in.p;
  auto& c = only_one(in, t.reduce_lr, "ReduceLROnPlateau");
  if (t.optimizer.schedule.type != ScheduleKind::None)
    p.fail("type", "is ReduceLROnPlateau, which sets the learning rate, but training.optimizer.learning_rate is a " +
                       std::string(schedule_name(t.optimizer.schedule.type)) +
                       " schedule (Keras refuses this too): use one or the other");
  c.monitor = read_monitor(in);
  c.factor = p.get_double("factor", c.factor, 0.0, 1.0);
  if (c.factor <= 0.0 || c.factor >= 1.0)
    p.fail("factor", "must be between 0 and 1 (new learning rate = learning rate * factor), got " +
                         YAML::Dump(YAML::Node(c.factor)));
  c.patience = p.get_int("patience", c.patience, 0);
  read_mode(in, c.mode, c.mode_where);
  c.min_delta = p.get_double("min_delta", c.min_delta, 0.0);
  c.cooldown = p.get_int("cooldown", c.cooldown, 0);
  c.min_lr = p.get_double("min_lr", c.min_lr, 0.0);
}

}  // namespace trainer
