#include "train/tensorboard.h"

#include <filesystem>

#include <spdlog/spdlog.h>

namespace trainer {

namespace {

/// Removes the event files in root's train/ and validation/ folders; returns how many.
int remove_event_files(const std::filesystem::path& root) {
  int removed = 0;
  for (const char* sub : {"train", "validation"}) {
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(root / sub, ec))
      if (f.path().filename().string().rfind("events.out.tfevents.", 0) == 0 && std::filesystem::remove(f.path(), ec))
        ++removed;
  }
  return removed;
}

/// root's train/ folder, once the files of an earlier run are gone when start_over.
std::string train_folder(const std::string& root, bool start_over) {
  if (start_over)
    if (const int n = remove_event_files(root))
      spdlog::info("TensorBoard: removed the {} event file(s) of an earlier run from {}", n, root);
  return (std::filesystem::path(root) / "train").string();
}

}  // namespace

TensorBoardLogger::TensorBoardLogger(const std::string& root, const TensorBoardConfig& cfg, bool start_over)
    : root_(root), cfg_(cfg), train_(train_folder(root, start_over)) {}

void TensorBoardLogger::on_train_batch_end(int64_t iteration, const std::map<std::string, double>& logs,
                                           double step_seconds) {
  if (cfg_.update_freq <= 0 || iteration % cfg_.update_freq != 0) return;
  for (const auto& [name, value] : logs) train_.scalar("batch_" + name, value, iteration);
  if (cfg_.write_steps_per_second && step_seconds > 0)
    train_.scalar("batch_steps_per_second", 1.0 / step_seconds, iteration);
}

bool TensorBoardLogger::wants_weights(int epoch) const {
  return cfg_.histogram_freq > 0 && (epoch - 1) % cfg_.histogram_freq == 0;
}

void TensorBoardLogger::on_epoch_end(int epoch, const std::map<std::string, double>& logs, double learning_rate,
                                     double steps_per_second, const std::vector<WeightRecord>& weights) {
  const int64_t step = epoch - 1;
  for (const auto& [name, value] : logs) {
    if (name == "learning_rate") continue;
    if (name.rfind("val_", 0) != 0) {
      train_.scalar("epoch_" + name, value, step);
      continue;
    }
    if (!validation_) validation_ = std::make_unique<EventFileWriter>((std::filesystem::path(root_) / "validation").string());
    validation_->scalar("epoch_" + name.substr(4), value, step);
  }
  train_.scalar("epoch_learning_rate", learning_rate, step);
  if (cfg_.write_steps_per_second) train_.scalar("epoch_steps_per_second", steps_per_second, step);
  if (wants_weights(epoch))
    for (const WeightRecord& w : weights) train_.histogram(w.layer + "/" + w.name + "/histogram", w.values, step);
}

}  // namespace trainer
