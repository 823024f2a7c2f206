// training.callbacks: a list of Keras callbacks, each read by its own reader
// (config/callbacks/), chosen by 'type'.
#include <algorithm>
#include <filesystem>

#include "config/callbacks/callback_reader.h"
#include "config/sections.h"
#include "core/error.h"

namespace trainer {

namespace {

/// A callback's reader, by its Keras class name.
struct CallbackReader {
  const char* type;
  void (*read)(const CallbackInput& in, TrainingConfig& t);
};
const CallbackReader kReaders[] = {{"EarlyStopping", read_early_stopping},
                                   {"ModelCheckpoint", read_model_checkpoint},
                                   {"ReduceLROnPlateau", read_reduce_lr_on_plateau},
                                   {"TensorBoard", read_tensorboard}};

// The quantities Keras logs each epoch, which is what a callback may monitor.
std::vector<std::string> monitorable(const std::vector<std::string>& metrics, bool has_validation) {
  std::vector<std::string> out = {"loss"};
  for (const auto& m : metrics) out.push_back(m);
  if (has_validation) {
    out.push_back("val_loss");
    for (const auto& m : metrics) out.push_back("val_" + m);
  }
  return out;
}

}  // namespace

std::string read_monitor(const CallbackInput& in) {
  ParamReader& p = in.p;
  const std::vector<std::string>& metrics = in.metrics;
  const bool has_validation = in.has_validation;
  std::string m = p.get_string("monitor", std::string("val_loss"));
  auto valid = monitorable(metrics, has_validation);
  if (std::find(valid.begin(), valid.end(), m) != valid.end()) return m;
  auto with_val = monitorable(metrics, true);
  if (std::find(with_val.begin(), with_val.end(), m) != with_val.end())
    p.fail("monitor", "is '" + m +
                          "', which needs validation data; set data.validation_split (e.g. 0.1) or "
                          "data.validation_images and data.validation_masks, or monitor one of: " + join_names(valid));
  const std::string bare = m.rfind("val_", 0) == 0 ? m.substr(4) : m;
  const std::vector<std::string>& known = metric_names();
  if (std::find(known.begin(), known.end(), bare) != known.end())
    p.fail("monitor", "is '" + m + "', but '" + bare + "' is not in training.metrics; add it there (metrics: [" +
                          bare + "]" +
                          (bare == "mean_io_u" ? ", Keras's MeanIoU, with a categorical loss; with a binary one "
                                                 "use BinaryIoU, logged binary_io_u"
                                               : "") +
                          ") or monitor one of: " + join_names(valid));
  p.fail("monitor", "is '" + m + "'" + did_you_mean(m, with_val) +
                        "; it must be the loss or a metric listed in training.metrics: " +
                        join_names(valid));
}

void read_mode(const CallbackInput& in, MonitorMode& mode, std::string& where) {
  const std::string name = in.p.get_string("mode", std::string(mode_name(mode)), monitor_mode_names());
  mode = MonitorMode(choice_index(name, monitor_mode_names()));
  where = in.p.where("mode") + ": " + in.what;
}

void require_inside_output_dir(ParamReader& p, const std::string& key, const std::string& path,
                               const std::string& example) {
  const std::filesystem::path fp(path);
  bool escapes = false;
  for (const auto& part : fp) escapes = escapes || part == "..";
  if (fp.is_absolute() || escapes)
    p.fail(key, "'" + path + "' leaves the output folder; it is a name inside training.output_dir (set output_dir "
                "or --output to choose the folder), e.g. " + example);
}

namespace {

/// For a Keras callback that trainer covers another way (or not at all),
/// what it does instead and the fix; "" for other types.
std::string covered_callback(const std::string& type) {
  if (type == "CSVLogger")
    return "trainer always writes <output_dir>/log.csv in CSVLogger's format (epoch, loss, metrics, val_*, one row "
           "per epoch)";
  if (type == "TerminateOnNaN")
    return "trainer always stops at a non-finite training loss (an error naming the epoch and step; checkpoints "
           "written so far are kept)";
  if (type == "BackupAndRestore")
    return "trainer writes <output_dir>/last.h5 after every epoch: continue an interrupted run with --resume "
           "<output_dir>/last.h5";
  if (type == "LearningRateScheduler")
    return "it takes a Python function; give training.optimizer.learning_rate a schedule instead (docs/config.md, "
           "Learning-rate schedules)";
  if (type == "LambdaCallback" || type == "RemoteMonitor" || type == "ProgbarLogger" || type == "History")
    return "it is not supported (trainer logs progress itself)";
  return "";
}

/// UserError for an entry written as text (what: its place): a notebook's
/// EarlyStopping(patience=5) gets its mapping, a bare class name the form.
[[noreturn]] void refuse_scalar_entry(const YAML::Node& entry, const std::string& file, const std::string& what) {
  const std::string text = entry.Scalar();
  const std::string mapping = python_call_mapping(text);
  const std::string bare = text.substr(0, text.find('('));
  if (const std::string note = covered_callback(bare.substr(bare.rfind('.') + 1)); !note.empty())
    throw UserError(yaml_location(file, entry.Mark()) + ": " + what + ": '" + text + "' is Keras's " + bare +
                    ": " + note + "; remove this entry");
  throw UserError(yaml_location(file, entry.Mark()) + ": " + what + ": '" + text + "' " +
                  (mapping.empty() ? "is not a mapping; write {type: " + text + "} with its keys, e.g. "
                                                     "{type: EarlyStopping, patience: 10}"
                                   : "is Python; write the mapping " + mapping));
}

}  // namespace

void read_callbacks(const YAML::Node& node, const std::string& file, TrainingConfig& t, bool has_validation) {
  if (!node.IsSequence())
    throw UserError(yaml_location(file, node.Mark()) +
                    ": training.callbacks: must be a list, e.g. '- {type: EarlyStopping, patience: 10}'");
  std::vector<std::string> types;
  for (const CallbackReader& r : kReaders) types.push_back(r.type);
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string what = "training.callbacks[" + std::to_string(i) + "]";
    if (node[i].IsScalar()) refuse_scalar_entry(node[i], file, what);
    ParamReader head(node[i], file, what);
    require_type(head, "EarlyStopping");
    if (const YAML::Node v = node[i].IsMap() ? node[i]["type"] : YAML::Node(); v && v.IsScalar())
      if (const std::string note = covered_callback(v.Scalar()); !note.empty())
        head.fail("type", "is Keras's " + v.Scalar() + ": " + note + "; remove this entry (callbacks here: " +
                              join_names(types) + ")");
    std::string type = head.get_string("type", std::nullopt, types);
    ParamReader p(node[i], file, what + " (" + type + ")");
    p.skip("type");
    p.skip("verbose");  // Keras's printing switch: trainer always logs what a callback does
    const CallbackInput in{p, what + " (" + type + ")", t.metrics, has_validation};
    for (const CallbackReader& r : kReaders)
      if (type == r.type) r.read(in, t);
    p.finish();
  }
}

}  // namespace trainer
