#include "config/params.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include <spdlog/fmt/fmt.h>

#include "core/error.h"

namespace trainer {

std::string yaml_location(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return file;
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

/// Lower case without '_': BinaryCrossentropy, binary_crossentropy and
/// early_stopping, EarlyStopping compare equal.
static std::string folded(const std::string& s) {
  std::string out;
  for (char ch : s)
    if (ch != '_') out += char(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string python_call_mapping(const std::string& text) {
  const size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  auto trim = [](std::string s) {
    const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
  };
  std::string name = trim(text.substr(0, open));
  if (const size_t dot = name.rfind('.'); dot != std::string::npos) name = name.substr(dot + 1);
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum((unsigned char)c) || c == '_'; }))
    return "";
  // The arguments, split at the commas outside brackets.
  std::vector<std::string> args;
  int depth = 0;
  std::string cur;
  for (char c : text.substr(open + 1, close - open - 1)) {
    depth += (c == '(' || c == '[' || c == '{') - (c == ')' || c == ']' || c == '}');
    if (c == ',' && depth == 0) {
      args.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  args.push_back(trim(cur));
  // Keras 3's positional parameters, in order, of the loss and optimizer classes (an optimizer's
  // Adam(1e-4) is its learning rate: a mapping without it would train at the default).
  static const std::vector<std::pair<std::string, std::vector<std::string>>> positional = {
      {"SGD", {"learning_rate", "momentum", "nesterov"}},
      {"Adam", {"learning_rate", "beta_1", "beta_2", "epsilon", "amsgrad"}},
      {"AdamW", {"learning_rate", "weight_decay", "beta_1", "beta_2", "epsilon", "amsgrad"}},
      {"RMSprop", {"learning_rate", "rho", "momentum", "epsilon", "centered"}},
      {"BinaryCrossentropy", {"from_logits", "label_smoothing"}},
      {"CategoricalCrossentropy", {"from_logits", "label_smoothing"}},
      {"SparseCategoricalCrossentropy", {"from_logits", "ignore_class"}},
      {"BinaryFocalCrossentropy", {"apply_class_balancing", "alpha", "gamma", "from_logits", "label_smoothing"}},
      {"CategoricalFocalCrossentropy", {"alpha", "gamma", "from_logits", "label_smoothing"}},
      {"Tversky", {"alpha", "beta"}}};
  const std::vector<std::string>* names = nullptr;
  for (const auto& [cls, params] : positional)
    if (ascii_lower(cls) == ascii_lower(name)) names = &params;  // Keras also takes "adam"
  std::string mapping = "{type: " + name, unnamed;
  size_t index = 0;
  for (const std::string& a : args) {
    if (a.empty()) continue;
    const size_t eq = a.find('=');
    const bool keyword = eq != std::string::npos && a.compare(eq, 2, "==") != 0;
    std::string key = keyword ? trim(a.substr(0, eq)) : "";
    std::string value = keyword ? trim(a.substr(eq + 1)) : a;
    if (!keyword && !(names && index < names->size())) {
      unnamed += (unnamed.empty() ? "" : ", ") + a;
      continue;
    }
    if (!keyword) key = (*names)[index++];
    if (key == "lr") key = "learning_rate";  // Keras 2's name
    if (value == "True") value = "true";
    if (value == "False") value = "false";
    if (value == "None") value = "null";
    mapping += ", " + key + ": " + value;
  }
  mapping += "}";
  if (!unnamed.empty()) mapping += " (with the key of each positional argument: " + unnamed + ")";
  return mapping;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& options) {
  // Keras spellings (older names, aliases, Keras's own keys and values) that
  // edit distance cannot connect to ours.
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"lr", "learning_rate"},         {"acc", "accuracy"},       {"val_acc", "val_accuracy"},
      {"MaxPool2D", "MaxPooling2D"},   {"AvgPool2D", "AveragePooling2D"}, {"Convolution2D", "Conv2D"}, {"Convolution2DTranspose", "Conv2DTranspose"},
      {"mixed_bfloat16", "bf16"},      {"bfloat16", "bf16"},      {"float32", "tf32"},
      {"class_name", "type"},          {"input_shape", "shape"},  {"binary_accuracy", "accuracy"},
      {"epsilon", "min_delta"},  // Keras 2's ReduceLROnPlateau(epsilon=...)
      {"load_weights", "initial_weights"},  // Keras's model.load_weights(path) before fit()
      {"dice_loss", "dice"},         {"dice_coef_loss", "dice"},  {"bce_dice_loss", "bce_dice"}};  // notebooks' own losses
  for (const auto& [old_name, name] : aliases)  // in any case: MaxPool2d is MaxPool2D
    if (ascii_lower(word) == ascii_lower(old_name) && std::find(options.begin(), options.end(), name) != options.end())
      return " (did you mean '" + name + "'?)";
  std::string best;
  size_t best_d = 3;
  for (const auto& o : options) {
    size_t d = folded(o) == folded(word) ? 0 : edit_distance(word, o);
    if (d < best_d) best_d = d, best = o;
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

ParamReader::ParamReader(const YAML::Node& node, std::string file, std::string what)
    : node_(node), file_(std::move(file)), what_(std::move(what)) {
  if (!node_.IsMap())
    throw UserError(yaml_location(file_, node_.Mark()) + ": " + what_ +
                    ": expected a mapping of 'key: value' pairs");
}

bool ParamReader::has(const std::string& key) const { return bool(node_[key]); }

bool ParamReader::has_optional(const std::string& key) {
  optional_.insert(key);
  return has(key);
}

std::string ParamReader::where(const std::string& key) const {
  // The value's place; for an empty value ('key:'), whose mark yaml-cpp puts at
  // the next token, the key's.
  for (const auto& kv : node_)
    if (kv.first.IsScalar() && kv.first.Scalar() == key)
      return yaml_location(file_, kv.second.IsNull() ? kv.first.Mark() : kv.second.Mark());
  return yaml_location(file_, node_.Mark());
}

void ParamReader::fail(const std::string& key, const std::string& msg) const {
  throw UserError(where(key) + ": " + what_ + ": '" + key + "' " + msg);
}

void ParamReader::fail(const std::string& msg) const {
  throw UserError(yaml_location(file_, node_.Mark()) + ": " + what_ + ": " + msg);
}

std::string ParamReader::key_given_instead(const std::string& key) const {
  std::string found;
  const std::string k = ascii_lower(key);
  for (const auto& kv : node_) {
    const std::string present = kv.first.as<std::string>(), p = ascii_lower(present);
    // A key read or known already ('name', 'type', validation_images, ...) is no misspelling of this one.
    if (used_.count(present) || optional_.count(present) || present == "name" || present == "type" ||
        present == "inputs")
      continue;
    const bool near = !did_you_mean(present, {key}).empty();
    // Another name around it: train_images, images_dir, dataset for data.
    const bool around = p.size() > k.size() && (p.rfind(k, 0) == 0 || p.compare(p.size() - k.size(), k.size(), k) == 0);
    if (near || around) found = present;
  }
  return found;
}

std::string ParamReader::given_instead(const std::string& key) const {
  const std::string present = key_given_instead(key);
  return present.empty() ? "" : " ('" + present + "' is there: did you mean '" + key + "'?)";
}

std::string ParamReader::key_where(const std::string& key) const {
  for (const auto& kv : node_)
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return yaml_location(file_, kv.first.Mark());
  return yaml_location(file_, node_.Mark());
}

YAML::Node ParamReader::value(const std::string& key, bool required) {
  used_.insert(key);
  YAML::Node v = node_[key];
  if (!v && required) fail("'" + key + "' is required; add '" + key + ": <value>'" + given_instead(key));
  if (v && v.IsNull()) fail(key, "has no value");
  return v;
}

YAML::Node ParamReader::get_node(const std::string& key) { return value(key, false); }

bool ParamReader::given(const std::string& key) {
  optional_.insert(key);  // a key looked for is known (suggestions), given or not
  const YAML::Node v = node_[key];
  if (v && v.IsNull()) used_.insert(key);
  return v && !v.IsNull();
}

std::string python_tuple_hint(const std::string& text) {
  if (text.rfind('(', 0) != 0) return "";
  if (text.back() != ')')
    return " (a Python tuple is a YAML list: [a, b], not (a, b); inside { } a tuple's commas also split the entry, "
           "which cuts the value short)";
  std::string as_list = text;  // the user's own tuple, as a YAML list
  for (char& ch : as_list) ch = ch == '(' ? '[' : ch == ')' ? ']' : ch;
  return " (a Python tuple is a YAML list: " + as_list + ", not " + text + ")";
}

template <typename T>
static bool convert_scalar(const YAML::Node& v, T& out) {
  if (!v.IsScalar()) return false;
  return YAML::convert<T>::decode(v, out);
}

int ParamReader::get_int(const std::string& key, std::optional<int> def, int min, int max) {
  YAML::Node v = value(key, !def);
  if (!v) return *def;
  int x;
  if (!convert_scalar(v, x)) {
    const std::string text = YAML::Dump(v);
    // A whole number past int's range is out of range, not "not an integer".
    const size_t digits = text.find_first_not_of("0123456789", text[0] == '-' || text[0] == '+' ? 1 : 0);
    if (v.IsScalar() && digits == std::string::npos && text.size() > 1)
      fail(key, "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + text);
    fail(key, "must be an integer, got '" + text + "'" + python_tuple_hint(text) +
                  (text == "None" ? " (Python's None is YAML's null)" : ""));
  }
  if (x < min || x > max)
    fail(key, "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
                  std::to_string(x));
  return x;
}

double ParamReader::get_double(const std::string& key, std::optional<double> def, double min,
                               double max) {
  YAML::Node v = value(key, !def);
  if (!v) return *def;
  double x;
  if (!convert_scalar(v, x) || !std::isfinite(x)) {
    const std::string text = YAML::Dump(v);
    // "1/255": YAML has no arithmetic; give the quotient.
    std::string hint = text == "None" ? " (Python's None is YAML's null)" : "";
    double a = 0, b = 0;
    const size_t slash = text.find('/');
    if (slash != std::string::npos && YAML::convert<double>::decode(YAML::Node(text.substr(0, slash)), a) &&
        YAML::convert<double>::decode(YAML::Node(text.substr(slash + 1)), b) && b != 0) {
      // The shortest of 15 or 17 significant digits that reads back as the quotient.
      std::ostringstream q;
      q.precision(15);
      q << a / b;
      if (std::stod(q.str()) != a / b) {
        q.str("");
        q.precision(17);
        q << a / b;
      }
      hint = " (YAML does no arithmetic: write " + q.str() + ")";
    }
    fail(key, "must be a number, got '" + text + "'" + hint);
  }
  if (x < min || x > max) {
    // The default bounds, +-1e300, are the finite numbers a config may give (1e308 is above them).
    std::string lo = fmt::format("{}", min);
    std::string hi = fmt::format("{}", max);
    fail(key, "must be in [" + lo + ", " + hi + "], got " + YAML::Dump(v));
  }
  return x;
}

bool ParamReader::get_bool(const std::string& key, std::optional<bool> def) {
  YAML::Node v = value(key, !def);
  if (!v) return *def;
  bool x;
  if (!convert_scalar(v, x)) fail(key, "must be true or false, got '" + YAML::Dump(v) + "'");
  return x;
}

std::string ParamReader::get_string(const std::string& key, std::optional<std::string> def,
                                    const std::vector<std::string>& allowed) {
  const std::string choices = allowed.empty() ? "" : "; use one of: " + join_names(allowed);
  if (YAML::Node raw = node_[key]; raw && raw.IsNull()) {
    used_.insert(key);
    fail(key, "has no value" + choices);
  }
  YAML::Node v = value(key, !def);
  if (!v) return *def;
  if (!v.IsScalar()) fail(key, "must be a string" + choices);
  std::string s = v.as<std::string>();
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), s) == allowed.end())
    fail(key, "is '" + s + "'" + did_you_mean(s, allowed) + "; use one of: " + join_names(allowed));
  return s;
}

std::string ParamReader::get_path(const std::string& key, std::optional<std::string> def) {
  std::string s = get_string(key, std::move(def));
  if (std::any_of(s.begin(), s.end(), [](char ch) { return (unsigned char)ch < 0x20; }))
    fail(key, "holds a control character (such as \\0 or a newline), which a path cannot hold safely; write the "
              "path without escapes");
  return s;
}

std::vector<std::string> ParamReader::get_string_list(
    const std::string& key, std::optional<std::vector<std::string>> def) {
  YAML::Node v = value(key, !def);
  if (!v) return *def;
  if (v.IsScalar()) return {v.as<std::string>()};
  if (!v.IsSequence()) fail(key, "must be a name or a list of names");
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.IsScalar()) fail(key, "must be a list of names");
    out.push_back(e.as<std::string>());
  }
  return out;
}

std::vector<int> ParamReader::get_int_list(const std::string& key, size_t len, int min, int max) {
  YAML::Node v = value(key, true);
  std::string want = "must be a list of " + std::to_string(len) + " integers in [" +
                     std::to_string(min) + ", " + std::to_string(max) + "]";
  if (v.IsSequence() && v.size() == len + 1 && (v[0].IsNull() || v[0].Scalar() == "None")) {
    YAML::Node rest(YAML::NodeType::Sequence);
    rest.SetStyle(YAML::EmitterStyle::Flow);
    for (size_t i = 1; i < v.size(); ++i) rest.push_back(v[i]);
    fail(key, want + ", got " + YAML::Dump(v) + " (leave out Keras's batch dimension: " + YAML::Dump(rest) + ")");
  }
  if (!v.IsSequence() || v.size() != len) fail(key, want + ", got " + YAML::Dump(v) + python_tuple_hint(YAML::Dump(v)));
  std::vector<int> out;
  for (const auto& e : v) {
    int x;
    if (e.IsNull() || (e.IsScalar() && e.Scalar() == "None"))
      fail(key, want + ", got " + YAML::Dump(v) + " (no None: every size is fixed" +
                    (key == "shape" ? "; images are resized to the Input's height and width" : "") + ")");
    if (!convert_scalar(e, x) || x < min || x > max) fail(key, want + ", got " + YAML::Dump(v));
    out.push_back(x);
  }
  return out;
}

std::vector<int> ParamReader::get_int_pair(const std::string& key,
                                           std::optional<std::vector<int>> def, int min, int max) {
  YAML::Node v = value(key, !def);
  if (!v) return *def;
  const std::string want =
      "must be an integer or a list of 2 integers in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  int x = 0;
  if (v.IsScalar() && !convert_scalar(v, x))  // a Python tuple, (2, 2) or cut short to (2 inside { }
    fail(key, want + ", got '" + YAML::Dump(v) + "'" + python_tuple_hint(YAML::Dump(v)));
  if (v.IsScalar()) {
    x = get_int(key, std::nullopt, min, max);
    return {x, x};
  }
  if (!v.IsSequence() || v.size() != 2)  // Keras: an integer or a tuple of 2
    fail(key, want + ", got " + YAML::Dump(v));
  return get_int_list(key, 2, min, max);
}

/// For a key written as Python's keyword argument (trainable=False) whose name is one of `names`: " (YAML
/// writes a key and its value as 'trainable: false')", Python's True, False and None as YAML's; else "".
static std::string keyword_argument_hint(const std::string& k, const std::set<std::string>& names) {
  const size_t eq = k.find('=');
  if (eq == std::string::npos || !names.count(k.substr(0, eq))) return "";
  std::string v = k.substr(eq + 1);
  v = v == "True" ? "true" : v == "False" ? "false" : v == "None" ? "null" : v;
  return " (YAML writes a key and its value as '" + k.substr(0, eq) + ": " + v + "')";
}

void ParamReader::finish() const {
  std::set<std::string> names = used_;
  names.insert(optional_.begin(), optional_.end());
  const std::vector<std::string> known(names.begin(), names.end());
  for (const auto& kv : node_) {
    std::string k = kv.first.as<std::string>();
    if (used_.count(k)) continue;
    const std::string hint = keyword_argument_hint(k, names);
    throw UserError(yaml_location(file_, kv.first.Mark()) + ": " + what_ + ": unknown key '" + k + "'" +
                    (hint.empty() ? did_you_mean(k, known) : hint) + "; known keys: " + join_names(known));
  }
}

}  // namespace trainer
