#include <optional>

#include "config/callbacks/callback_reader.h"

namespace trainer {

void read_early_stopping(const CallbackInput& in, TrainingConfig& t) {
  ParamReader& p = in.p;
  auto& c = only_one(in, t.early_stopping, "EarlyStopping");
  c.monitor = read_monitor(in);
  c.min_delta = p.get_double("min_delta", c.min_delta, 0.0);
  c.patience = p.get_int("patience", c.patience, 0);
  read_mode(in, c.mode, c.mode_where);
  c.restore_best_weights = p.get_bool("restore_best_weights", c.restore_best_weights);
  if (p.has_optional("baseline") && p.given("baseline")) c.baseline = p.get_double("baseline", std::nullopt);
  c.start_from_epoch = p.get_int("start_from_epoch", c.start_from_epoch, 0);
}

}  // namespace trainer
