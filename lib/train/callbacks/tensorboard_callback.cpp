// TensorBoard (Keras's keras.callbacks.TensorBoard): event files of the
// batch and epoch values, the graph and weight histograms, through
// TensorBoardLogger (train/tensorboard.h), on the process that writes files.
// A resumed run's event files start with those of the run its checkpoint
// belongs to, up to the checkpoint. No training_state of its own.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "train/callbacks/registry.h"
#include "train/model_graph.h"
#include "train/run_folder.h"
#include "train/tensorboard.h"
#include "train/trainer.h"
#include "train/training_log.h"

namespace trainer {

namespace {

namespace fs = std::filesystem;

/// The loss column of the log.csv at path by epoch (0-based); empty when path is "" or cannot be read.
std::map<int64_t, double> logged_losses(const std::string& path) {
  std::map<int64_t, double> out;
  if (path.empty()) return out;
  try {
    const TrainingLog log = read_training_log(path);
    const auto column = std::find(log.columns.begin(), log.columns.end(), "loss");
    if (column == log.columns.end()) return out;
    const std::vector<double>& values = log.values[size_t(column - log.columns.begin())];
    for (size_t row = 0; row < log.epochs.size() && row < values.size(); ++row)
      out[int64_t(log.epochs[row])] = values[row];
  } catch (const UserError&) {
    out.clear();  // a log the run could not have written: nothing to check against
  }
  return out;
}

class TensorBoardCallback final : public Callback {
 public:
  explicit TensorBoardCallback(const CallbackSetup& setup)
      : setup_(setup), cfg_(setup.trainer->config().training.tensorboard), trainer_(*setup.trainer) {}

  /// Opens the event files (a resumed run's carried over up to b) and writes the graph.
  void on_train_begin(const TrainBegin& b) override {
    TensorBoardStart start;
    if (setup_.resumed) {  // the checkpoint's run's events up to it, as log.csv's rows
      start = {(fs::path(setup_.resume_run_folder) / cfg_.log_dir).string(), b.epochs_done, b.iterations, {}};
      start.losses = logged_losses(setup_.earlier_log);
    }
    logger_.emplace((fs::path(setup_.output_dir) / cfg_.log_dir).string(), cfg_, start);
    if (cfg_.write_graph) logger_->graph(model_graph_def(trainer_.model(), trainer_.config().model));
    spdlog::info("TensorBoard: event files in {} (tensorboard --logdir {})", logger_->folder(), setup_.output_dir);
  }

  void on_train_batch_end(const BatchEnd& b) override {
    if (logger_->wants_batch(b.iterations)) logger_->on_train_batch_end(b.iterations, b.logs(), b.seconds);
  }

  /// epoch_learning_rate: log.csv's learning_rate where it has one, else the rate.
  void on_epoch_logged(EpochEnd& e) override {
    const auto lr = e.logs.find("learning_rate");
    logger_->on_epoch_end(e.epoch, e.iterations, e.logs,
                          lr != e.logs.end() ? lr->second : trainer_.learning_rate_at(e.iterations),
                          e.steps_per_second,
                          logger_->wants_weights(e.epoch) ? trainer_.weights() : std::vector<WeightRecord>{});
    e.remember(logger_->folder());
  }

 private:
  CallbackSetup setup_;
  TensorBoardConfig cfg_;
  Trainer& trainer_;
  std::optional<TensorBoardLogger> logger_;  ///< From on_train_begin.
};

}  // namespace

void check_tensorboard_files(const Config& config) {
  const ModelCheckpointConfig& mc = config.training.model_checkpoint;
  // TensorBoard's folder must be none of the run's files, nor lie in one (log_dir: log.csv would fail after the
  // first epoch).
  const TensorBoardConfig& tb = config.training.tensorboard;
  if (tb.enabled) {
    const auto parts = [](const std::string& path) {  // the path's parts, "." and trailing "/" gone
      std::vector<std::string> out;
      for (const auto& part : std::filesystem::path(path).lexically_normal())
        if (!part.empty() && part != ".") out.push_back(part.string());
      return out;
    };
    std::vector<std::vector<std::string>> files;
    for (const char* own : kRunFiles) files.push_back({own});
    if (mc.enabled && mc.filepath.find('{') == std::string::npos) files.push_back(parts(mc.filepath));
    const std::vector<std::string> dir = parts(tb.log_dir);
    for (const auto& f : files)
      if (!f.empty() && dir.size() >= f.size() && std::equal(f.begin(), f.end(), dir.begin()))
        throw UserError(tb.where + ": 'log_dir' '" + tb.log_dir + "' is (or lies in) the run's file " +
                        std::filesystem::path(f.back()).string() + "; choose another folder inside output_dir, "
                        "e.g. 'logs'");
  }
}

std::unique_ptr<Callback> make_tensorboard(const CallbackSetup& setup) {
  return std::make_unique<TensorBoardCallback>(setup);
}

}  // namespace trainer
