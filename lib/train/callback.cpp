#include "train/callback.h"

#include <spdlog/fmt/fmt.h>

#include "core/error.h"

namespace trainer {

void StateReader::damaged(const std::string& what) const { throw UserError(source_ + ": " + what + kDamagedState); }

double StateReader::scalar(const std::string& name, double lo, double hi) const {
  const auto it = c_.state_scalars.find(name);
  if (it == c_.state_scalars.end())
    throw UserError(source_ + " holds no '" + name + "' training state; resume from last.h5 or a "
                              "ModelCheckpoint file written by this version of trainer");
  const double v = it->second;
  // Best values start at +-inf (the default bounds); everything else a run writes is finite.
  if (std::isnan(v) || v < lo || v > hi)
    damaged("training state '" + name + "' is " + fmt::format("{}", v) + ", which no run writes");
  return v;
}

int StateReader::count(const std::string& name, int lo) const {
  const double v = scalar(name, lo, 1 << 30);
  if (v != std::floor(v)) damaged("training state '" + name + "' is " + fmt::format("{}", v) + ", not a whole number");
  return int(v);
}

}  // namespace trainer
