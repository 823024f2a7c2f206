#include "config/shared_settings.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace trainer {

namespace {

/// A value that counts as given: defined and not null (the config reader takes null as left out).
bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

/// Whether two scalars are the same setting, as the config reader decodes them: the same text, the same
/// integer (yaml-cpp reads 010 as octal 8, and 64-bit seeds exactly), or the same finite number.
bool same_scalar(const YAML::Node& a, const YAML::Node& b) {
  if (a.Scalar() == b.Scalar()) return true;
  long long i = 0, j = 0;
  unsigned long long u = 0, v = 0;
  if (YAML::convert<long long>::decode(a, i) && YAML::convert<long long>::decode(b, j)) return i == j;
  if (YAML::convert<unsigned long long>::decode(a, u) && YAML::convert<unsigned long long>::decode(b, v)) return u == v;
  double x = 0, y = 0;
  return YAML::convert<double>::decode(a, x) && YAML::convert<double>::decode(b, y) && std::isfinite(x) &&
         std::isfinite(y) && x == y;
}

/// n in YAML flow style, cut at 80 characters; "not given" when absent.
std::string flow_text(const YAML::Node& n) {
  if (!present(n)) return "not given";
  std::string text;
  if (n.IsMap()) {
    for (auto it = n.begin(); it != n.end(); ++it)
      text += (text.empty() ? "" : ", ") + it->first.Scalar() + ": " + flow_text(it->second);
    text = "{" + text + "}";
  } else if (n.IsSequence()) {
    for (auto it = n.begin(); it != n.end(); ++it) text += (text.empty() ? "" : ", ") + flow_text(*it);
    text = "[" + text + "]";
  } else {
    text = n.Scalar();
  }
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

/// A list entry's label: key[i], and the entry's name (a layer) or type (a callback) when it has one.
std::string entry(const std::string& key, size_t i, const YAML::Node& a, const YAML::Node& b) {
  const std::string label = key + "[" + std::to_string(i) + "]";
  for (const YAML::Node& n : {a, b})
    for (const char* id : {"name", "type"})
      if (present(n) && n.IsMap() && present(n[id]) && n[id].IsScalar()) return label + " (" + n[id].Scalar() + ")";
  return label;
}

/// Sets out to the first difference below key and returns true; false when a and b are the same settings.
bool first_difference(const YAML::Node& a, const YAML::Node& b, const std::string& key, SettingDifference& out) {
  const auto differ = [&] {
    out = {key, flow_text(a), flow_text(b)};
    return true;
  };
  if (!present(a) || !present(b)) return present(a) != present(b) && differ();
  if (a.IsMap() && b.IsMap()) {
    std::set<std::string> names;  // in order, whatever order each side wrote them in
    for (const YAML::Node* side : {&a, &b})
      for (auto it = side->begin(); it != side->end(); ++it) names.insert(it->first.Scalar());
    for (const std::string& name : names)
      if (first_difference(a[name], b[name], key.empty() ? name : key + "." + name, out)) return true;
    return false;
  }
  if (a.IsSequence() && b.IsSequence()) {
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      const YAML::Node x = i < a.size() ? a[i] : YAML::Node(), y = i < b.size() ? b[i] : YAML::Node();
      if (first_difference(x, y, entry(key, i, x, y), out)) return true;
    }
    return false;
  }
  if (a.IsScalar() && b.IsScalar() && same_scalar(a, b)) return false;
  return differ();
}

}  // namespace

std::string shared_settings(const Config& config, bool resumes) {
  YAML::Node root = YAML::Load(config.text);
  if (YAML::Node d = root["data"]; d.IsMap()) {
    d.remove("loader_threads");
    for (const char* folder : {"images", "masks", "validation_images", "validation_masks"})
      if (present(d[folder])) {
        d.remove(folder);  // not assigned through an alias
        d[folder] = "given";
      }
  }
  if (YAML::Node t = root["training"]; t.IsMap()) {
    t.remove("output_dir");
    t.remove("initial_weights");  // as read: a path, or {filepath, skip_mismatch}
    if (!config.training.initial_weights.empty()) {  // the file given (its path may differ), and how it is read
      t["initial_weights"]["filepath"] = "given";
      t["initial_weights"]["skip_mismatch"] = config.training.initial_weights_skip_mismatch;
    }
  }
  root["--resume"] = resumes ? "given" : "not given";
  return YAML::Dump(root);
}

std::optional<SettingDifference> settings_difference(const std::string& a, const std::string& b) {
  SettingDifference d;
  if (!first_difference(YAML::Load(a), YAML::Load(b), "", d)) return std::nullopt;
  return d;
}

}  // namespace trainer
