#include "train/tensorboard.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <utility>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "io/tensorboard_event.pb.h"

namespace trainer {

namespace fs = std::filesystem;

namespace {

/// Whether an event is a value at an optimizer step (batch_<name>, Keras's evaluation_<name>_vs_iterations), not
/// at an epoch (epoch_<name>, histograms, whose tags are "<layer>/<weight>/histogram": a layer's name may start
/// with batch_, as Keras's batch_normalization_1).
bool at_step(const tensorboard::Summary::Value& v) {
  const std::string& tag = v.tag();
  const std::string suffix = "_vs_iterations";
  return !v.has_histo() && (tag.rfind("batch_", 0) == 0 ||
                            (tag.size() > suffix.size() && tag.compare(tag.size() - suffix.size(), suffix.size(), suffix) == 0));
}

/// The first value of the Event serialized in record (parsed into e), or nullptr for an event without one
/// (a file's version) or a record that does not parse.
const tensorboard::Summary::Value* first_value(const std::string& record, tensorboard::Event& e) {
  if (!e.ParseFromString(record) || !e.has_summary() || e.summary().value_size() == 0) return nullptr;
  return &e.summary().value(0);
}

/// The serialized events of folder's event files that happened by start's checkpoint (a value at a step up
/// to iterations_done, any other at an epoch below epochs_done), one per tag and step: a later file's
/// replaces an earlier's (a copy left by a run that failed while carrying them, or files that an older
/// trainer added beside each other on resume). In the order first seen.
std::vector<std::string> carried_events(const fs::path& folder, const TensorBoardStart& start,
                                        std::vector<std::string>& damaged) {
  std::vector<std::string> kept;
  std::map<std::pair<std::string, int64_t>, size_t> at;  // (tag, step) -> index in kept
  for (const std::string& file : event_files_in(folder.string())) {
    bool bad = false;
    std::vector<std::string> records = read_event_records(file, &bad);
    if (bad) damaged.push_back(file);
    for (std::string& record : records) {
      tensorboard::Event e;
      const tensorboard::Summary::Value* v = first_value(record, e);
      if (!v || (at_step(*v) ? e.step() > start.iterations_done : e.step() >= start.epochs_done)) continue;
      const auto [it, fresh] = at.emplace(std::make_pair(v->tag(), e.step()), kept.size());
      if (fresh) kept.push_back(std::move(record));
      else kept[it->second] = std::move(record);
    }
  }
  return kept;
}

/// path with "tfevents" in its name replaced by "tf-events-damaged": TensorBoard reads every file whose name
/// holds "tfevents", and this one no more.
fs::path damaged_name(const fs::path& path) {
  std::string name = path.filename().string();
  name.replace(name.find("tfevents"), 8, "tf-events-damaged");
  return path.parent_path() / name;
}

}  // namespace

TensorBoardLogger::TensorBoardLogger(const std::string& root, const TensorBoardConfig& cfg,
                                     const TensorBoardStart& start)
    : root_(root), cfg_(cfg) {
  const fs::path train = fs::path(root) / "train", val = fs::path(root) / "validation";
  std::vector<std::string> carried_train, carried_val, damaged;
  if (!start.resumed_from.empty()) {
    carried_train = carried_events(fs::path(start.resumed_from) / "train", start, damaged);
    carried_val = carried_events(fs::path(start.resumed_from) / "validation", start, damaged);
  }
  // A run with --overwrite and no TensorBoard callback leaves the replaced run's event files, which its resume
  // must not carry as its own history.
  bool foreign = false;
  for (const std::string& record : carried_train) {
    tensorboard::Event e;
    const tensorboard::Summary::Value* v = first_value(record, e);
    const auto logged = v && v->tag() == "epoch_loss" ? start.losses.find(e.step()) : start.losses.end();
    if (logged == start.losses.end() || std::abs(v->simple_value() - logged->second) <=
                                            1e-4 * std::max(1.0, std::abs(logged->second)))
      continue;
    spdlog::warn("TensorBoard: the event files in {} are of another run (epoch_loss {:g} at epoch {}, where the "
                 "resumed run's log.csv has loss {:g}): not carried over; this run's curves start at epoch {}",
                 start.resumed_from, v->simple_value(), e.step(), logged->second, start.epochs_done + 1);
    carried_train.clear();
    carried_val.clear();
    foreign = true;
    break;
  }
  // The validation folder too is made now (its file with the first value): one that cannot be made fails here.
  std::error_code made;
  fs::create_directories(val, made);
  if (made || !fs::is_directory(val))
    throw UserError("cannot create the TensorBoard folder '" + val.string() + "': " +
                    (made ? made.message() : std::string("a file of that name is in the way")) +
                    "; remove it, or set the TensorBoard callback's log_dir to another folder");
  std::vector<std::string> earlier = event_files_in(train.string());
  for (std::string& f : event_files_in(val.string())) earlier.push_back(std::move(f));
  train_ = std::make_unique<EventFileWriter>(train.string());
  for (const std::string& e : carried_train) train_->add_serialized(e);
  for (const std::string& e : carried_val) validation().add_serialized(e);
  train_->sync();  // on disk before the files it replaces are gone
  if (validation_) validation_->sync();
  // A damaged file is kept for a look: renamed out of TensorBoard's reading when it is one of this folder's
  // (the same file however its path was spelled), else left where it is, in the other run's folder.
  std::error_code ec;
  const auto among = [&](const std::vector<std::string>& files, const std::string& f) {
    return std::any_of(files.begin(), files.end(), [&](const std::string& g) { return fs::equivalent(f, g, ec); });
  };
  const auto warn_damaged = [](const std::string& f, const std::string& fate) {
    spdlog::warn("TensorBoard: {} is damaged (a record fails its checksum): its values after that are not carried "
                 "over{}", f, fate);
  };
  for (const std::string& f : earlier) {
    if (!among(damaged, f)) {
      fs::remove(f, ec);
      continue;
    }
    const fs::path kept = damaged_name(f);
    fs::rename(f, kept, ec);
    warn_damaged(f, ec ? "; the file is left as it is (" + ec.message() + ")" : "; the file is kept as " + kept.string());
  }
  for (const std::string& d : damaged)
    if (!among(earlier, d)) warn_damaged(d, "");
  if (!start.resumed_from.empty() && carried_train.empty() && start.epochs_done > 0 && !foreign)
    spdlog::warn("TensorBoard: no values of the resumed run in {} (it wrote none there, or to another log_dir); "
                 "its curves start at step {} (epoch {})", start.resumed_from, start.epochs_done,
                 start.epochs_done + 1);
  else if (!start.resumed_from.empty())
    spdlog::info("TensorBoard: {} value(s) of the first {} epoch(s) carried over from {}",
                 carried_train.size() + carried_val.size(), start.epochs_done, start.resumed_from);
  else if (!earlier.empty())
    spdlog::info("TensorBoard: removed the {} event file(s) of an earlier run from {}", earlier.size(), root);
}

std::vector<std::string> other_event_folders(const std::string& output_dir, const TrainingConfig& tc) {
  std::vector<fs::path> mine;
  if (tc.tensorboard.enabled)
    for (const char* sub : {"train", "validation"})
      mine.push_back((fs::path(output_dir) / tc.tensorboard.log_dir / sub).lexically_normal());
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(output_dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (it.depth() >= 4) it.disable_recursion_pending();
    const fs::path& p = it->path();
    if (p.filename().string().find("tfevents") == std::string::npos || !it->is_regular_file(ec)) continue;
    const fs::path folder = p.parent_path().lexically_normal();
    if (std::find(mine.begin(), mine.end(), folder) == mine.end() &&
        std::find(out.begin(), out.end(), folder.string()) == out.end())
      out.push_back(folder.string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool holds_epoch_values(const std::string& root) {
  for (const char* sub : {"train", "validation"})
    for (const std::string& file : event_files_in((fs::path(root) / sub).string()))
      for (const std::string& record : read_event_records(file)) {
        tensorboard::Event e;
        const tensorboard::Summary::Value* v = first_value(record, e);
        if (v && !at_step(*v)) return true;
      }
  return false;
}

EventFileWriter& TensorBoardLogger::validation() {
  if (!validation_) validation_ = std::make_unique<EventFileWriter>((fs::path(root_) / "validation").string());
  return *validation_;
}

void TensorBoardLogger::graph(const std::string& graph_def) {
  train_->graph(graph_def);
}

bool TensorBoardLogger::wants_batch(int64_t iteration) const {
  return cfg_.update_freq > 0 && iteration % cfg_.update_freq == 0;
}

void TensorBoardLogger::on_train_batch_end(int64_t iteration, const std::map<std::string, double>& logs,
                                           double step_seconds) {
  if (!wants_batch(iteration)) return;
  for (const auto& [name, value] : logs) train_->scalar("batch_" + name, value, iteration);
  if (cfg_.write_steps_per_second && step_seconds > 0)
    train_->scalar("batch_steps_per_second", 1.0 / step_seconds, iteration);
}

bool TensorBoardLogger::wants_weights(int epoch) const {
  return cfg_.histogram_freq > 0 && (epoch - 1) % cfg_.histogram_freq == 0;
}

void TensorBoardLogger::on_epoch_end(int epoch, int64_t iteration, const std::map<std::string, double>& logs,
                                     double learning_rate, double steps_per_second,
                                     const std::vector<WeightRecord>& weights) {
  const int64_t step = epoch - 1;
  for (const auto& [name, value] : logs) {
    if (name == "learning_rate") continue;
    if (name.rfind("val_", 0) != 0) {
      train_->scalar("epoch_" + name, value, step);
      continue;
    }
    validation().scalar("epoch_" + name.substr(4), value, step);
    validation().scalar("evaluation_" + name.substr(4) + "_vs_iterations", value, iteration);
  }
  train_->scalar("epoch_learning_rate", learning_rate, step);
  if (cfg_.write_steps_per_second) train_->scalar("epoch_steps_per_second", steps_per_second, step);
  if (wants_weights(epoch))
    for (const WeightRecord& w : weights) train_->histogram(w.layer + "/" + w.name + "/histogram", w.values, step);
}

}  // namespace trainer
