#include "train/callbacks.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/error.h"

namespace trainer {

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

double worst(bool max) {
  return max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
}

}  // namespace

bool monitor_is_max(const std::string& monitor, MonitorMode mode) {
  if (mode == MonitorMode::Max) return true;
  if (mode == MonitorMode::Min) return false;
  const std::string name = monitor.rfind("val_", 0) == 0 ? monitor.substr(4) : monitor;
  if (contains(name, "loss")) return false;
  return contains(name, "acc") || contains(name, "iou") || contains(name, "io_u") || contains(name, "auc") ||
         contains(name, "dice") || contains(name, "precision") || contains(name, "recall");
}

EarlyStopping::EarlyStopping(const EarlyStoppingConfig& cfg)
    : max_(monitor_is_max(cfg.monitor, cfg.mode)),
      min_delta_(std::fabs(cfg.min_delta)),
      patience_(cfg.patience),
      baseline_(cfg.baseline),
      start_from_epoch_(cfg.start_from_epoch),
      first_watched_(cfg.start_from_epoch + 1),
      best_(worst(max_)) {}

bool EarlyStopping::beats(double value, double reference) const {
  return max_ ? value - min_delta_ > reference : value + min_delta_ < reference;
}

bool EarlyStopping::below_baseline() const { return baseline_ && !beats(best_, *baseline_); }

bool EarlyStopping::on_epoch_end(int epoch, double value) {
  improved_ = false;
  if (epoch <= start_from_epoch_) return false;
  ++wait_;
  improved_ = beats(value, best_);
  if (improved_) {
    best_ = value;
    best_epoch_ = epoch;
    if (!baseline_ || beats(value, *baseline_)) wait_ = 0;
    return false;
  }
  // Keras takes its first watched value as the best whatever it is (its best starts as None): that
  // epoch is an improvement there, which resets the wait without a baseline and never stops. Only a NaN
  // (or an infinity) fails to beat the initial best here; it still does not become the best.
  if (epoch == first_watched_) {
    if (!baseline_) wait_ = 0;
    return false;
  }
  return wait_ >= patience_;
}

ReduceLROnPlateau::ReduceLROnPlateau(const ReduceLROnPlateauConfig& cfg)
    : cfg_(cfg), max_(monitor_is_max(cfg.monitor, cfg.mode)), best_(worst(max_)) {}

double ReduceLROnPlateau::on_epoch_end(double value, double lr) {
  const double delta = std::fabs(cfg_.min_delta);
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    wait_ = 0;
  }
  if (max_ ? value > best_ + delta : value < best_ - delta) {
    best_ = value;
    wait_ = 0;
    return lr;
  }
  // As Keras, the cooldown is checked after this epoch's decrement: its last
  // epoch already counts towards patience.
  if (cooldown_left_ > 0 || ++wait_ < cfg_.patience) return lr;
  if (!(float(lr) > float(cfg_.min_lr))) return lr;
  wait_ = 0;
  cooldown_left_ = cfg_.cooldown;
  return std::max(lr * cfg_.factor, cfg_.min_lr);
}

CheckpointPolicy::CheckpointPolicy(const ModelCheckpointConfig& cfg)
    : save_best_only_(cfg.save_best_only), max_(monitor_is_max(cfg.monitor, cfg.mode)), best_(worst(max_)) {}

bool CheckpointPolicy::should_save(double value) {
  const bool better = max_ ? value > best_ : value < best_;
  if (better) best_ = value;
  return !save_best_only_ || better;
}

namespace {

/// Python's repr of a float: the shortest %.Ng that reads back exactly, with ".0"
/// added when it would otherwise look like an integer.
std::string python_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

[[noreturn]] void bad_placeholder(const std::string& pattern, const std::string& field, const std::string& why) {
  throw UserError("filepath '" + pattern + "': placeholder {" + field + "}: " + why);
}

/// Formats one field "name" or "name:spec".
std::string format_field(const std::string& pattern, const std::string& field, int epoch,
                         const std::map<std::string, double>& logs) {
  const size_t colon = field.find(':');
  const std::string name = field.substr(0, colon);
  const std::string spec = colon == std::string::npos ? "" : field.substr(colon + 1);
  const bool is_epoch = name == "epoch";
  double value = epoch;
  if (!is_epoch) {
    auto it = logs.find(name);
    if (it == logs.end()) {
      std::string known = "epoch";
      for (const auto& kv : logs) known += ", " + kv.first;
      bad_placeholder(pattern, field,
                      "unknown name '" + name + "'; known: " + known +
                          (name.rfind("val_", 0) == 0 && !logs.count("val_loss")
                               ? " (val_* values need validation data: set data.validation_split or "
                                 "data.validation_images and data.validation_masks)"
                               : ""));
    }
    value = it->second;
  }
  if (spec.empty()) return is_epoch ? std::to_string(epoch) : python_repr(value);
  // [0][width][.precision](d|f)
  size_t i = 0;
  const bool zero = spec[0] == '0';
  if (zero) ++i;
  int width = 0, precision = -1;
  while (i < spec.size() && std::isdigit((unsigned char)spec[i])) width = width * 10 + (spec[i++] - '0');
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    const size_t start = i;
    precision = 0;
    while (i < spec.size() && std::isdigit((unsigned char)spec[i])) precision = precision * 10 + (spec[i++] - '0');
    if (i == start) bad_placeholder(pattern, field, "'.' must be followed by a precision, as in .4f");
  }
  // No type: Python formats an int as 'd' ({epoch:02} is 01, 02, ...).
  const char type = i == spec.size() && is_epoch && precision < 0 ? 'd' : i + 1 == spec.size() ? spec[i] : '?';
  if (type != 'd' && type != 'f')
    bad_placeholder(pattern, field, "unsupported format spec '" + spec + "'; use d (epoch only) or .Nf, e.g. 03d, .4f");
  if (width > 200 || precision > 50) bad_placeholder(pattern, field, "width or precision too large");
  char buf[320];
  if (type == 'd') {
    if (!is_epoch) bad_placeholder(pattern, field, "'d' needs an integer; '" + name + "' is a float, use .Nf");
    if (precision >= 0) bad_placeholder(pattern, field, "precision is not allowed with 'd'");
    std::snprintf(buf, sizeof buf, zero ? "%0*d" : "%*d", width, epoch);
  } else {
    std::snprintf(buf, sizeof buf, zero ? "%0*.*f" : "%*.*f", width, precision < 0 ? 6 : precision, value);
  }
  return buf;
}

}  // namespace

std::string format_filepath(const std::string& pattern, int epoch, const std::map<std::string, double>& logs) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '}') {
      if (i + 1 < pattern.size() && pattern[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw UserError("filepath '" + pattern + "': single '}' at position " + std::to_string(i) +
                      "; write '}}' for a literal brace");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < pattern.size() && pattern[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = pattern.find('}', i + 1);
    if (close == std::string::npos)
      throw UserError("filepath '" + pattern + "': '{' at position " + std::to_string(i) +
                      " is never closed; write '{{' for a literal brace");
    out += format_field(pattern, pattern.substr(i + 1, close - i - 1), epoch, logs);
    i = close;
  }
  return out;
}

}  // namespace trainer
