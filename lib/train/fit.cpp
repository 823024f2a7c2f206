#include "train/fit.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>

#include "core/error.h"
#include "train/callbacks.h"
#include "train/progress.h"

namespace trainer {

namespace fs = std::filesystem;

std::pair<std::vector<int>, std::vector<int>> split_validation(int n, double validation_split) {
  const int train_n = int(double(n) * (1.0 - validation_split));  // Keras: split_at
  std::vector<int> train(static_cast<size_t>(train_n)), val(static_cast<size_t>(n - train_n));
  std::iota(train.begin(), train.end(), 0);
  std::iota(val.begin(), val.end(), train_n);
  return {train, val};
}

static void add_logs(std::map<std::string, double>& logs, const std::string& prefix,
                     const BatchStats& s, const std::vector<std::string>& metrics) {
  logs[prefix + "loss"] = s.loss();
  for (const auto& m : metrics) logs[prefix + m] = s.counts.value(m);
}

static std::string save(const Config& config, Trainer& trainer, const std::string& path, int epoch,
                        const std::map<std::string, double>& logs) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);  // filepath may name a subfolder
  Checkpoint ckpt;
  ckpt.config_yaml = config.text;
  ckpt.epoch = epoch;
  ckpt.logs = logs;
  ckpt.weights = trainer.weights();
  save_checkpoint(path, ckpt);
  return path;
}

FitResult fit(const Config& config, Trainer& trainer, const Dataset& data, const FitOptions& options) {
  const TrainingConfig& tc = config.training;
  auto [train_idx, val_idx] = split_validation(data.size(), config.data.validation_split);
  if (train_idx.empty())
    throw UserError(config.path + ": no training samples left after validation_split " +
                    std::to_string(config.data.validation_split) + " of " + std::to_string(data.size()) +
                    " pairs; lower data.validation_split or add data");
  std::error_code ec;
  fs::create_directories(tc.output_dir, ec);
  if (ec)
    throw UserError("cannot create output folder '" + tc.output_dir + "': " + ec.message() +
                    "; set training.output_dir or --output to a writable folder");
  spdlog::info("training on {} samples, validating on {}; global batch {} over {} tower(s)",
               train_idx.size(), val_idx.size(), tc.batch_size, trainer.towers());

  const bool has_val = !val_idx.empty();
  auto needs_val = [&](const std::string& monitor) {
    if (monitor.rfind("val_", 0) == 0 && !has_val)
      throw UserError(config.path + ": monitor '" + monitor +
                      "' needs validation data; set data.validation_split > 0 or monitor '" +
                      monitor.substr(4) + "'");
  };
  std::unique_ptr<EarlyStopping> early;
  if (tc.early_stopping.enabled) {
    needs_val(tc.early_stopping.monitor);
    early = std::make_unique<EarlyStopping>(tc.early_stopping);
  }
  std::unique_ptr<CheckpointPolicy> policy;
  if (tc.model_checkpoint.enabled) {
    if (tc.model_checkpoint.save_best_only) needs_val(tc.model_checkpoint.monitor);
    policy = std::make_unique<CheckpointPolicy>(tc.model_checkpoint);
  }

  FitResult result;
  std::vector<float> best_params, best_state;
  std::vector<int> batch;
  const int steps = int((train_idx.size() + size_t(tc.batch_size) - 1) / size_t(tc.batch_size));
  Progress progress(options.progress_bar, tc.epochs, steps);
  for (int epoch = 1; epoch <= tc.epochs; ++epoch) {
    if (config.data.shuffle) {
      std::mt19937_64 rng(tc.seed * 1000003ull + uint64_t(epoch));
      std::shuffle(train_idx.begin(), train_idx.end(), rng);
    }
    progress.start_epoch(epoch);
    const auto t0 = std::chrono::steady_clock::now();
    BatchStats train;
    for (int s = 0; s < steps; ++s) {
      const size_t b = size_t(s) * size_t(tc.batch_size);
      batch.assign(train_idx.begin() + long(b),
                   train_idx.begin() + long(std::min(train_idx.size(), b + size_t(tc.batch_size))));
      BatchStats st = trainer.train_step(data, batch);
      if (!std::isfinite(st.loss()))
        throw UserError("loss became " + std::to_string(st.loss()) + " at epoch " + std::to_string(epoch) +
                        ", step " + std::to_string(s + 1) +
                        "; lower training.optimizer.learning_rate (the best checkpoint so far is kept)");
      train.add(st);
      progress.step(s + 1, train.loss());
    }
    const double train_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::map<std::string, double> logs;
    add_logs(logs, "", train, tc.metrics);
    if (has_val) add_logs(logs, "val_", trainer.evaluate(data, val_idx, tc.batch_size), tc.metrics);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.end_epoch(logs, seconds, double(train_idx.size()) / train_seconds);
    result.epochs_run = epoch;
    result.last_logs = logs;

    if (policy && (!tc.model_checkpoint.save_best_only || policy->should_save(logs.at(tc.model_checkpoint.monitor)))) {
      const std::string name = format_filepath(tc.model_checkpoint.filepath, epoch, logs);
      const std::string path = (fs::path(tc.output_dir) / name).string();
      save(config, trainer, path, epoch, logs);
      spdlog::info("epoch {}: saved {}", epoch, path);
      if (std::find(result.files.begin(), result.files.end(), path) == result.files.end())
        result.files.push_back(path);
    }
    if (early) {
      bool stop = early->on_epoch_end(epoch, logs.at(tc.early_stopping.monitor));
      if (early->improved() && tc.early_stopping.restore_best_weights) {
        best_params = trainer.params(0);
        best_state = trainer.state(0);
      }
      if (stop) {
        spdlog::info("early stopping at epoch {}: {} did not improve for {} epochs (best {:.4f} at epoch {})",
                     epoch, tc.early_stopping.monitor, tc.early_stopping.patience, early->best(),
                     early->best_epoch());
        result.stopped_early = true;
        break;
      }
    }
  }
  if (early && tc.early_stopping.restore_best_weights && !best_params.empty()) {
    spdlog::info("restoring the weights of epoch {} (best {})", early->best_epoch(), tc.early_stopping.monitor);
    trainer.set_weights(best_params, best_state);
  }
  const std::string final_path = (fs::path(tc.output_dir) / "final.h5").string();
  result.files.push_back(save(config, trainer, final_path, result.epochs_run, result.last_logs));
  return result;
}

}  // namespace trainer
