#pragma once
// The settings that every process of a run of several (an MPI launch) must
// share, and where two processes' settings differ (docs/multi_node.md).
#include <optional>
#include <string>

#include "config/config.h"

namespace trainer {

/// The settings of config that every process of a run must share, as YAML
/// text: config.text (with the flags applied) less what may differ between
/// hosts: data.loader_threads (each host's cores), training.output_dir (rank 0
/// alone writes), and the paths of the data folders (mounted elsewhere) and
/// of the initial weights (the processes compare their bytes apart),
/// which are kept only as given or not; `--resume` says whether that flag was
/// given.
std::string shared_settings(const Config& config, bool resumes);

/// Where two settings differ: a dotted key, list entries by index and name
/// ("model.layers[2] (c1).filters"), and each side's value in YAML flow style
/// (at most 80 characters; "not given" where absent).
struct SettingDifference {
  std::string key, a, b;
};
/// The first difference between the YAML texts a and b, compared as values:
/// map keys in any order, numbers by value (0.01 is 1e-2), a key set to null
/// as one left out, styles and comments ignored. std::nullopt when none.
std::optional<SettingDifference> settings_difference(const std::string& a, const std::string& b);

}  // namespace trainer
