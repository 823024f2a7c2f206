#include "train/tensorboard.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "lib/io/tensorboard_event.pb.h"

namespace trainer {

namespace fs = std::filesystem;

namespace {

/// Whether an event of the run that start names happened by its checkpoint: a batch_ value (or Keras's
/// evaluation_*_vs_iterations) at a step up to iterations_done, any other (epoch values, histograms) at an
/// epoch below epochs_done. Events without a summary (a file's version) are not carried.
bool before_checkpoint(const tensorboard::Event& e, const TensorBoardStart& start) {
  if (!e.has_summary() || e.summary().value_size() == 0) return false;
  const std::string& tag = e.summary().value(0).tag();
  const bool by_step = tag.rfind("batch_", 0) == 0 || tag.find("_vs_iterations") != std::string::npos;
  return by_step ? e.step() <= start.iterations_done : e.step() < start.epochs_done;
}

/// The serialized events of folder's event files that happened by start's checkpoint, in file order.
std::vector<std::string> carried_events(const fs::path& folder, const TensorBoardStart& start) {
  std::vector<std::string> kept;
  for (const std::string& file : event_files_in(folder.string()))
    for (std::string& record : read_event_records(file)) {
      tensorboard::Event e;
      if (e.ParseFromString(record) && before_checkpoint(e, start)) kept.push_back(std::move(record));
    }
  return kept;
}

}  // namespace

TensorBoardLogger::TensorBoardLogger(const std::string& root, const TensorBoardConfig& cfg,
                                     const TensorBoardStart& start)
    : root_(root), cfg_(cfg) {
  const fs::path train = fs::path(root) / "train", val = fs::path(root) / "validation";
  std::vector<std::string> carried_train, carried_val;
  if (!start.resumed_from.empty()) {
    carried_train = carried_events(fs::path(start.resumed_from) / "train", start);
    carried_val = carried_events(fs::path(start.resumed_from) / "validation", start);
  }
  std::vector<std::string> earlier = event_files_in(train.string());
  for (std::string& f : event_files_in(val.string())) earlier.push_back(std::move(f));
  train_ = std::make_unique<EventFileWriter>(train.string());
  for (const std::string& e : carried_train) train_->add_serialized(e);
  for (const std::string& e : carried_val) validation().add_serialized(e);
  std::error_code ec;
  for (const std::string& f : earlier) fs::remove(f, ec);
  if (!start.resumed_from.empty())
    spdlog::info("TensorBoard: {} value(s) of the first {} epoch(s) carried over from {}",
                 carried_train.size() + carried_val.size(), start.epochs_done, start.resumed_from);
  else if (!earlier.empty())
    spdlog::info("TensorBoard: removed the {} event file(s) of an earlier run from {}", earlier.size(), root);
}

EventFileWriter& TensorBoardLogger::validation() {
  if (!validation_) validation_ = std::make_unique<EventFileWriter>((fs::path(root_) / "validation").string());
  return *validation_;
}

void TensorBoardLogger::on_train_batch_end(int64_t iteration, const std::map<std::string, double>& logs,
                                           double step_seconds) {
  if (cfg_.update_freq <= 0 || iteration % cfg_.update_freq != 0) return;
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
