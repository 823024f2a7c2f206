// The names of config.h's enums of Keras's choices, in each enum's order:
// what the config file writes and the messages and logs print.
#include "config/sections.h"
#include "core/error.h"

namespace trainer {

const std::vector<std::string>& monitor_mode_names() {
  static const std::vector<std::string> names = {"auto", "min", "max"};
  return names;
}

const std::vector<std::string>& fill_mode_names() {
  static const std::vector<std::string> names = {"constant", "nearest", "reflect", "wrap"};
  return names;
}

const std::vector<std::string>& scaling_names() {
  static const std::vector<std::string> names = {"none", "linear", "sqrt"};
  return names;
}

size_t choice_index(const std::string& value, const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == value) return i;
  throw InternalError("'" + value + "' is none of the choices it was checked against");
}

const char* mode_name(MonitorMode mode) { return monitor_mode_names()[size_t(mode)].c_str(); }
const char* fill_mode_name(FillMode mode) { return fill_mode_names()[size_t(mode)].c_str(); }
const char* scaling_name(LearningRateScaling scaling) { return scaling_names()[size_t(scaling)].c_str(); }

}  // namespace trainer
