#include "train/fit.h"

#include <spdlog/spdlog.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <regex>

#include "core/error.h"
#include "core/shell_word.h"
#include "dist/root_work.h"
#include "train/callbacks.h"
#include "viz/training_log.h"
#include "train/csv_logger.h"
#include "train/model_graph.h"
#include "train/tensorboard.h"
#include "train/lr_schedule.h"
#include "train/progress.h"

namespace trainer {

namespace fs = std::filesystem;

namespace {

/// training_state attributes "best_log_<name>": the logs of the epoch whose weights best_params holds.
constexpr const char* kBestLogPrefix = "best_log_";
/// training_state attribute set to 1 in the checkpoints of the epoch at which EarlyStopping ended the run.
constexpr const char* kEarlyStoppedKey = "early_stopped";

/// 0, 1, ..., n - 1.
std::vector<int> every_index(int n) {
  std::vector<int> v(size_t(std::max(n, 0)));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

std::pair<std::vector<int>, std::vector<int>> split_validation(int n, double validation_split) {
  const int train_n = int(double(n) * (1.0 - validation_split));  // Keras: split_at
  std::vector<int> train(static_cast<size_t>(train_n)), val(static_cast<size_t>(n - train_n));
  std::iota(train.begin(), train.end(), 0);
  std::iota(val.begin(), val.end(), train_n);
  return {train, val};
}

std::vector<int> epoch_order(std::vector<int> train, uint64_t seed, int epoch, bool shuffle) {
  if (shuffle) {
    std::mt19937_64 rng(seed * 1000003ull + uint64_t(epoch));
    std::shuffle(train.begin(), train.end(), rng);
  }
  return train;
}

namespace {

/// What a stream (several processes) fed this process's towers in an epoch.
struct Decoded {
  long long samples = 0;  ///< Samples decoded for them.
  double wait = 0;        ///< Seconds the loop waited for those decodings.
};

/// Per epoch, for each tower: the seconds it waited for input data and (GPU
/// towers) its peak device memory, e.g.
/// "epoch 3 towers: data wait 0.12 s, 0.10 s; peak memory 12.3 GiB, 12.3 GiB";
/// with a stream, also what it decoded (", decoded 18 samples, waiting 0.40 s for them").
void log_towers(int epoch, Trainer& trainer, const std::optional<Decoded>& decoded) {
  std::string waits, peaks;
  for (double w : trainer.take_input_wait_seconds()) waits += fmt::format("{}{:.2f} s", waits.empty() ? "" : ", ", w);
  for (size_t b : trainer.peak_memory_bytes())
    if (b) peaks += fmt::format("{}{:.1f} GiB", peaks.empty() ? "" : ", ", double(b) / double(1 << 30));
  spdlog::info("epoch {} towers: data wait {}{}{}", epoch, waits,
               decoded ? fmt::format(", decoded {} samples, waiting {:.2f} s for them", decoded->samples,
                                     decoded->wait)
                       : "",
               peaks.empty() ? "" : "; peak memory " + peaks);
}

/// out <- the pairs of a global batch that this process's towers take (Trainer::process_shard).
void own_pairs(const Trainer& trainer, const std::vector<int>& batch, std::vector<int>& out) {
  const auto [lo, hi] = trainer.process_shard(int(batch.size()));
  out.assign(batch.begin() + lo, batch.begin() + hi);
}

/// local <- indices for train_step over the Dataset of own_pairs(batch): position k of the process's shard
/// [lo, hi) reads sample k - lo; the others' positions -1 (never read here).
void own_indices(const Trainer& trainer, int batch, std::vector<int>& local) {
  const auto [lo, hi] = trainer.process_shard(batch);
  local.assign(size_t(batch), -1);
  std::iota(local.begin() + lo, local.begin() + hi, 0);
}

/// The validation samples this process's towers take, batch after batch of `batch_size`, decoded from stream;
/// indices (out) gets, for each of `val`'s positions, its sample in the result (-1: another process's).
Dataset own_validation(const Trainer& trainer, SampleStream& stream, const std::vector<int>& val, int batch_size,
                       std::vector<int>& indices) {
  std::vector<int> which;
  indices.assign(val.size(), -1);
  for (size_t first = 0; first < val.size(); first += size_t(batch_size)) {
    const auto [lo, hi] = trainer.process_shard(int(std::min(val.size() - first, size_t(batch_size))));
    for (int k = lo; k < hi; ++k) {
      indices[first + size_t(k)] = int(which.size());
      which.push_back(val[first + size_t(k)]);
    }
  }
  return stream.take(which);  // a copy: the training steps reuse the stream's buffers
}


void add_logs(std::map<std::string, double>& logs, const std::string& prefix, const BatchStats& s,
              const std::vector<std::string>& metrics) {
  logs[prefix + "loss"] = s.loss();
  for (const auto& m : metrics) logs[prefix + m] = s.counts.value(m);
}

/// The loop's state beyond the towers: what a checkpoint must hold to resume.
struct RunState {
  int next_epoch = 1, next_step = 0;   ///< Where the run continues.
  BatchStats epoch_sums;               ///< Sums of the unfinished epoch's steps.
  double epoch_seconds = 0;            ///< Training time of those steps.
  std::unique_ptr<EarlyStopping> early;
  std::unique_ptr<CheckpointPolicy> policy;
  std::unique_ptr<ReduceLROnPlateau> reduce_lr;
  std::vector<float> best_params, best_state;  ///< For restore_best_weights.
  std::map<std::string, double> best_logs;     ///< Their epoch's logs, for final.h5 ({} in older checkpoints).
  bool early_stopped = false;                  ///< EarlyStopping ended the run at the last finished epoch.
};

/// A checkpoint of the current weights, logs and (for resuming) everything in s.
Checkpoint make_checkpoint(const Config& config, Trainer& trainer, int epoch,
                           const std::map<std::string, double>& logs, const RunState& s) {
  Checkpoint c;
  c.config_yaml = config.text;
  c.epoch = epoch;
  c.logs = logs;
  c.weights = trainer.weights();
  trainer.save_optimizer(c);
  c.state_scalars["next_epoch"] = s.next_epoch;
  c.state_scalars["next_step"] = s.next_step;
  c.state_scalars["epoch_loss_sum"] = s.epoch_sums.loss_sum;
  c.state_scalars["epoch_samples"] = s.epoch_sums.samples;
  c.state_scalars["epoch_seconds"] = s.epoch_seconds;
  // The global batch and learning rate as resolved for the run's towers (batch_size_per_device,
  // learning_rate_scaling): a resume over other towers is told when they change.
  c.state_scalars["global_batch_size"] = trainer.config().training.batch_size;
  c.state_scalars["learning_rate_resolved"] = trainer.config().training.optimizer.learning_rate;
  c.state_double_arrays["epoch_counts"] = s.epoch_sums.counts.v;
  if (s.early) {
    c.state_scalars["early_stopping_best"] = s.early->best();
    c.state_scalars["early_stopping_best_epoch"] = s.early->best_epoch();
    c.state_scalars["early_stopping_wait"] = s.early->wait();
    if (s.early_stopped) c.state_scalars[kEarlyStoppedKey] = 1;
  }
  if (s.policy) c.state_scalars["checkpoint_best"] = s.policy->best();
  if (s.reduce_lr) {
    c.state_scalars["reduce_lr_learning_rate"] = trainer.learning_rate();
    c.state_scalars["reduce_lr_initial_rate"] = trainer.config().training.optimizer.learning_rate;  // as scaled
    c.state_scalars["reduce_lr_best"] = s.reduce_lr->best();
    c.state_scalars["reduce_lr_wait"] = s.reduce_lr->wait();
    c.state_scalars["reduce_lr_cooldown"] = s.reduce_lr->cooldown_left();
  }
  if (!s.best_params.empty()) {
    c.state_arrays["best_params"] = s.best_params;
    c.state_arrays["best_state"] = s.best_state;
    for (const auto& [name, value] : s.best_logs) c.state_scalars[kBestLogPrefix + name] = value;
  }
  return c;
}

/// c without its training state: the config, epoch, logs and weights, which
/// predict, evaluate and export read and --resume refuses (final.h5, and
/// ModelCheckpoint files with save_weights_only, as Keras's weights files).
Checkpoint weights_only(Checkpoint c) {
  c.state_scalars.clear();
  c.state_arrays.clear();
  c.state_double_arrays.clear();
  return c;
}

/// Warns, at where (the callback's mode in the config), when its explicit mode runs against its monitor: max on a
/// loss, min on a metric (every metric here is better when larger). Keras
/// follows such a mode too, silently; it is always a slip.
void warn_mode_against_monitor(const std::string& where, const std::string& monitor, const std::string& mode) {
  if (mode == "auto" || monitor_is_max(monitor, mode) == monitor_is_max(monitor, "auto")) return;
  spdlog::warn("{}: mode {} on {} takes the {} {} as the best, the worst one; use mode {} (or auto)", where, mode,
               monitor, mode == "max" ? "largest" : "smallest", monitor, mode == "max" ? "min" : "max");
}

/// Writes c, taken in epoch `epoch`, to path (creating its folder) and returns
/// path. UserError, with nothing written, when c holds a NaN or infinity
/// (first_non_finite): the weights diverged although the loss stayed finite
/// (a ReLU turns NaN into 0).
/// Every process of world checks its c (check_together: the error printed once
/// when all raise it); only world rank 0 writes, while the others wait
/// (run_on_root: a failed write is raised on every process).
std::string save(const std::string& path, const Checkpoint& c, int epoch, ProcessGroup* world) {
  check_together(world, [&] {
    if (const std::string bad = first_non_finite(c, true); !bad.empty())
      throw UserError("training diverged in epoch " + std::to_string(epoch) + ": " + bad +
                      ", although the loss stayed finite; lower training.optimizer.learning_rate or set "
                      "training.optimizer.clipnorm ('" + path + "' is not written; checkpoints written so far are "
                      "kept)");
  });
  run_on_root(world, [&] {  // rank 0's disk time is not counted against the others' collective timeout
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);  // filepath may name a subfolder
    save_checkpoint(path, c);
  });
  return path;
}

/// Writes final.h5 into config's output folder and returns its path: the trainer's weights after epochs_run
/// epochs (logs: that epoch's), or, with restore_best_weights and best weights kept in s, those, restored into
/// the trainer, with their epoch and logs when s has them (older checkpoints: the last epoch's).
std::string save_final(const Config& config, Trainer& trainer, int epochs_run, const std::map<std::string, double>& logs,
                       const RunState& s, ProcessGroup* world) {
  const TrainingConfig& tc = config.training;
  Checkpoint final_ckpt;
  final_ckpt.config_yaml = config.text;
  final_ckpt.epoch = epochs_run;
  final_ckpt.logs = logs;
  if (s.early && tc.early_stopping.restore_best_weights && !s.best_params.empty()) {
    spdlog::info("restoring the weights of epoch {} (best {})", s.early->best_epoch(), tc.early_stopping.monitor);
    trainer.set_weights(s.best_params, s.best_state);
    if (!s.best_logs.empty()) {  // final.h5 then says which epoch its weights are of, with that epoch's logs
      final_ckpt.epoch = s.early->best_epoch();
      final_ckpt.logs = s.best_logs;
    }
  }
  final_ckpt.weights = trainer.weights();
  return save((fs::path(tc.output_dir) / "final.h5").string(), final_ckpt, epochs_run, world);
}

/// Restores s's kept best weights (restore_best_weights) and their epoch's logs from checkpoint c, if it holds
/// them. UserError naming source when they are not of the trainer's model (a damaged or edited file).
void restore_best(const Checkpoint& c, const std::string& source, RunState& s, const Trainer& trainer) {
  if (!c.state_arrays.count("best_params")) return;
  for (const auto& [key, value] : c.state_scalars)
    if (key.rfind(kBestLogPrefix, 0) == 0) s.best_logs[key.substr(std::strlen(kBestLogPrefix))] = value;
  s.best_params = c.state_arrays.at("best_params");
  auto st = c.state_arrays.find("best_state");
  s.best_state = st == c.state_arrays.end() ? std::vector<float>{} : st->second;
  if (s.best_params.size() != trainer.model().num_params() || s.best_state.size() != trainer.model().num_state())
    throw UserError(source + ": the kept best weights (training_state/best_params, best_state) hold " +
                    std::to_string(s.best_params.size()) + " + " + std::to_string(s.best_state.size()) +
                    " values, the model " + std::to_string(trainer.model().num_params()) + " + " +
                    std::to_string(trainer.model().num_state()) + kDamagedState);
}

/// Restores s (and a reduced learning rate) from a checkpoint written by
/// make_checkpoint. UserError naming the file and the value for state that is
/// missing or could not have been written by a run (a damaged or edited file).
void restore(const Checkpoint& c, const std::string& source, RunState& s, Trainer& trainer) {
  auto scalar = [&](const std::string& name, double lo = -HUGE_VAL, double hi = HUGE_VAL) {
    auto it = c.state_scalars.find(name);
    if (it == c.state_scalars.end())
      throw UserError(source + " holds no '" + name + "' training state; resume from last.h5 or a "
                               "ModelCheckpoint file written by this version of trainer");
    const double v = it->second;
    // Best values start at +-inf (the default bounds); everything else a run writes is finite.
    if (std::isnan(v) || v < lo || v > hi)
      throw UserError(source + ": training state '" + name + "' is " + fmt::format("{}", v) +
                      ", which no run writes" + kDamagedState);
    return v;
  };
  auto count = [&](const std::string& name, int lo) {
    const double v = scalar(name, lo, 1 << 30);
    if (v != std::floor(v))
      throw UserError(source + ": training state '" + name + "' is " + fmt::format("{}", v) +
                      ", not a whole number" + kDamagedState);
    return int(v);
  };
  s.next_epoch = count("next_epoch", 1);
  s.next_step = count("next_step", 0);
  const TrainingConfig& tc = trainer.config().training;
  if (auto b = c.state_scalars.find("global_batch_size"); b != c.state_scalars.end() && b->second != tc.batch_size)
    spdlog::warn("{}'s run trained with a global batch of {:g}; this one uses {} ({} tower(s){}): its steps, and "
                 "with learning_rate_scaling its learning rate ({:g}, was {:g}), differ from the stopped run's",
                 source, b->second, tc.batch_size, trainer.world_towers(),
                 tc.batch_size_per_device ? fmt::format(" x batch_size_per_device {}", tc.batch_size_per_device) : "",
                 tc.optimizer.learning_rate,
                 c.state_scalars.count("learning_rate_resolved") ? c.state_scalars.at("learning_rate_resolved")
                                                                 : tc.optimizer.learning_rate);
  s.epoch_sums.loss_sum = scalar("epoch_loss_sum", 0, 1e300);
  s.epoch_sums.samples = scalar("epoch_samples", 0, 1e18);
  s.epoch_seconds = scalar("epoch_seconds", 0, 1e18);
  // A run stopped within an epoch saved the sums of its steps; one stopped at an epoch's end, none. (From a
  // review: an edited next_step with no samples logged a made-up epoch of loss 0.)
  if ((s.next_step > 0) != (s.epoch_sums.samples > 0))
    throw UserError(source + ": training state 'next_step' is " + std::to_string(s.next_step) +
                    " with 'epoch_samples' " + fmt::format("{}", s.epoch_sums.samples) +
                    ", which no run writes (the steps done in an epoch and their samples go together)" + kDamagedState);
  std::vector<double>& counts = s.epoch_sums.counts.v;
  auto stored = c.state_double_arrays.find("epoch_counts");
  if (stored == c.state_double_arrays.end()) {  // written before 2026-12-02: binary counts as scalars
    for (size_t i = 0; i < counts.size(); ++i) counts[i] = scalar("epoch_count_" + std::to_string(i), 0, 1e18);
  } else {
    if (stored->second.size() != counts.size())
      throw UserError(source + ": training state 'epoch_counts' holds " + std::to_string(stored->second.size()) +
                      " metric counts where this model keeps " + std::to_string(counts.size()) +
                      (trainer.classes() > 0 ? " (for its " + std::to_string(trainer.classes()) + " classes)" : "") +
                      kDamagedState);
    for (size_t i = 0; i < counts.size(); ++i) {
      const double v = stored->second[i];
      if (!(v >= 0 && v <= 1e18 && v == std::floor(v)))
        throw UserError(source + ": training state 'epoch_counts' entry " + std::to_string(i) + " is " +
                        fmt::format("{}", v) + ", which no run writes" + kDamagedState);
      counts[i] = v;
    }
  }
  if (s.early && c.state_scalars.count("early_stopping_best"))
    s.early->restore(scalar("early_stopping_best"), count("early_stopping_best_epoch", -1),
                     count("early_stopping_wait", 0));
  if (s.policy && c.state_scalars.count("checkpoint_best")) s.policy->restore(scalar("checkpoint_best"));
  if (s.reduce_lr && c.state_scalars.count("reduce_lr_learning_rate")) {
    // The reductions so far carry over; a learning_rate changed in the config
    // since (warned about) scales with them: rate * (configured now / configured then).
    const double rate = scalar("reduce_lr_learning_rate", 0, 1e300);
    const double then = scalar("reduce_lr_initial_rate", 1e-300, 1e300), now = trainer.learning_rate();
    trainer.set_learning_rate(now == then ? rate : rate * (now / then));
    if (now != then)
      spdlog::warn("ReduceLROnPlateau: the carried learning rate {:g} becomes {:g} (learning_rate is {:g}, was {:g})",
                   rate, trainer.learning_rate(), now, then);
    s.reduce_lr->restore(scalar("reduce_lr_best"), count("reduce_lr_wait", 0), count("reduce_lr_cooldown", 0));
  }
  restore_best(c, source, s, trainer);
  spdlog::info("resuming from {}: epoch {}, step {}", source, s.next_epoch, s.next_step);
}

/// Removes the temporary files ("<file>.tmp-<pid>", io/atomic_file.h) that a process killed while writing a
/// checkpoint (.h5) or log.csv left in output_dir (or the ModelCheckpoint's folder in it): those of a pid that runs
/// no more on this machine. Said at info level (from a multi-process trial: a 250 MB last.h5.tmp-<pid> stayed
/// after a SIGKILL, run after run).
void remove_dead_temporaries(const fs::path& output_dir, const ModelCheckpointConfig& mc) {
  std::vector<fs::path> folders = {output_dir};
  const fs::path sub = fs::path(mc.filepath).parent_path();
  if (mc.enabled && !sub.empty() && sub.string().find('{') == std::string::npos) folders.push_back(output_dir / sub);
  // Checkpoints and log.csv: a run's own files (evaluate's CSV there may be another live process's, elsewhere).
  const std::regex temporary(R"((.+\.h5|log\.csv)\.tmp-([0-9]{1,9}))");
  std::vector<std::string> removed;
  std::error_code ec;
  for (const fs::path& folder : folders)
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      std::smatch m;
      const std::string name = it->path().filename().string();
      if (!std::regex_match(name, m, temporary) || !it->is_regular_file(ec)) continue;
      const pid_t pid = pid_t(std::stol(m[2].str()));
      if (pid == getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to tell)
      std::error_code gone;
      if (fs::remove(it->path(), gone)) removed.push_back(it->path().string());
    }
  if (!removed.empty())
    spdlog::info("removed {} temporary file(s) left by a run killed while writing: {}", removed.size(),
                 fmt::join(removed, ", "));
}

/// The loss column of the log.csv at path by epoch (0-based); empty when path is "" or cannot be read.
std::map<int64_t, double> logged_losses(const std::string& path) {
  std::map<int64_t, double> out;
  if (path.empty()) return out;
  try {
    const viz::TrainingLog log = viz::read_training_log(path);
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

}  // namespace

std::string run_folder_of(const std::string& checkpoint, const std::string& checkpoint_filepath) {
  std::error_code ec;
  // Walked up from the absolute path, so that a bare name (ep1.h5 in run/ck) has folders above it.
  const fs::path cwd = fs::current_path(ec);
  const fs::path beside = fs::absolute(checkpoint, ec).lexically_normal().parent_path();
  auto holds_run = [&](const fs::path& folder) {
    for (const char* name : kRunFiles)
      if (fs::exists(folder / name, ec)) return true;
    return false;
  };
  fs::path run = beside;
  if (!holds_run(beside)) {
    // A ModelCheckpoint file in a subfolder: its run folder is as many levels up as the filepath's folders.
    const fs::path sub = fs::path(checkpoint_filepath).lexically_normal().parent_path();
    fs::path up = beside;
    for (auto part = sub.begin(); part != sub.end(); ++part) up = up.parent_path();
    if (!sub.empty() && holds_run(up)) run = up;
  }
  if (fs::path(checkpoint).is_absolute() || cwd.empty()) return run.string();
  const fs::path relative = run.lexically_relative(cwd);  // in the form the user gave
  return relative.empty() ? run.string() : relative.string();
}

std::string continue_with(const FitOptions& options, const std::string& last) {
  const bool several = options.world && options.world->size() > 1;
  return std::string("continue with") + (several ? ", as each process of the same mpirun or srun launch" : "") +
         ": " + (options.continue_command.empty() ? "" : options.continue_command + " ") + "--resume " +
         shell_word(last);
}

bool resumes_in_place(const std::string& run_folder, const std::string& output_dir) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(run_folder, ec);
  if (ec) return false;
  const fs::path b = fs::weakly_canonical(output_dir, ec);
  return !ec && a == b;
}

namespace {

/// The files in output_dir that a ModelCheckpoint of filepath (its pattern, relative to output_dir; "" for
/// none) could have written, as paths relative to output_dir in name order: in the pattern's folder, the
/// names that match it with {epoch...} as digits and another {name...} as a number's text. A placeholder in
/// the folder part matches nothing.
std::vector<std::string> checkpoint_files(const fs::path& output_dir, const std::string& filepath) {
  const fs::path pattern(filepath);
  const fs::path folder = pattern.parent_path();
  const std::string name = pattern.filename().string();
  std::vector<std::string> out;
  if (filepath.empty() || folder.string().find('{') != std::string::npos) return out;
  std::string re;
  for (size_t i = 0; i < name.size(); ++i) {
    const size_t close = name[i] == '{' ? name.find('}', i) : std::string::npos;
    if (close != std::string::npos) {
      re += name.compare(i + 1, 5, "epoch") == 0 ? "[0-9]+" : "[-+.0-9a-zA-Z]+";
      i = close;
    } else {
      if (std::strchr(".^$|()[]{}*+?\\", name[i])) re += '\\';
      re += name[i];
    }
  }
  const std::regex match(re);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(output_dir / folder, ec))
    if (std::regex_match(e.path().filename().string(), match)) out.push_back((folder / e.path().filename()).string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

void check_output_holds_no_run(const std::string& output_dir, const std::string& resume, const TrainingConfig& tc,
                               const std::string& resume_run_folder) {
  std::string found;
  std::error_code ec;
  for (const char* name : kRunFiles)
    if (fs::exists(fs::path(output_dir) / name, ec)) found += std::string(found.empty() ? "" : ", ") + name;
  // Event files of finished epochs (a run that failed in its first epoch leaves batch values alone, which its
  // rerun may replace).
  if (tc.tensorboard.enabled && holds_epoch_values((fs::path(output_dir) / tc.tensorboard.log_dir).string()))
    found += (found.empty() ? "" : ", ") + (fs::path(tc.tensorboard.log_dir) / "").string() +
             " (TensorBoard event files)";
  const std::vector<std::string> checkpoints =
      checkpoint_files(output_dir, tc.model_checkpoint.enabled ? tc.model_checkpoint.filepath : "");
  for (size_t i = 0; i < checkpoints.size() && i < 3; ++i) found += (found.empty() ? "" : ", ") + checkpoints[i];
  if (checkpoints.size() > 3) found += " and " + std::to_string(checkpoints.size() - 3) + " more checkpoints";
  if (found.empty()) return;
  const std::string last = (fs::path(output_dir) / "last.h5").string();
  std::string ways = "choose another --output, or pass --overwrite to start over in it";
  if (resume.empty() && fs::exists(last, ec)) ways = "continue it with --resume " + last + ", " + ways;
  if (!resume.empty())  // the checkpoint's own folder is the likely intent
    ways = "resume in the checkpoint's own run folder (--output " + resume_run_folder + " when it holds that run), " +
           ways;
  throw UserError("output folder '" + output_dir + "' holds an earlier run (" + found + "), which " +
                  (resume.empty() ? "a new run" : "resuming " + resume + " there") + " would overwrite: " + ways);
}

int logged_epochs(const std::string& folder) {
  std::ifstream in(fs::path(folder) / "log.csv");
  std::string line;
  int epochs = 0;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    char* end = nullptr;
    const long e = std::strtol(line.c_str(), &end, 10);
    if (end != line.c_str() && e >= 0 && e < INT_MAX) epochs = std::max(epochs, int(e) + 1);
  }
  return epochs;
}

void check_resume_keeps_later_epochs(const std::string& output_dir, const std::string& checkpoint, int epoch) {
  std::error_code ec;
  const fs::path last = fs::path(output_dir) / "last.h5";
  if (fs::equivalent(checkpoint, last, ec)) return;
  const int logged = logged_epochs(output_dir);
  if (logged <= epoch) return;
  throw UserError("resuming " + checkpoint + " (epoch " + std::to_string(epoch) + ") in its run's folder '" +
                  output_dir + "' would overwrite the run's later epochs (log.csv holds " + std::to_string(logged) +
                  "; last.h5 and final.h5 are theirs): continue the run with --resume " + last.string() +
                  " (with a higher --epochs once it has finished), branch off at epoch " + std::to_string(epoch) +
                  " into another --output (the log's first " + std::to_string(epoch) +
                  " rows are copied), or pass --overwrite to drop the later epochs");
}

FitResult fit(const Config& config, Trainer& trainer, const Dataset& data, const FitOptions& options) {
  const TrainingConfig& tc = trainer.config().training;  // the batch and learning rate resolved for the towers
  const bool voice = !options.world || options.world->rank() == 0;  // prints and writes
  // The signal that asks for a stop, agreed by every process (the largest any of them caught), so that all
  // stop at the same step; 0: none.
  auto stop_signal = [&]() -> int {
    double v = options.stop ? double(options.stop->load()) : 0.0;
    if (options.world && options.world->size() > 1) options.world->all_reduce_max(&v, 1);
    return int(v);
  };
  // Validation folders (Keras's validation_data): every pair trains; else validation_split decides.
  const auto [train_idx, val_idx] =
      options.validation ? std::make_pair(every_index(data.size()), every_index(options.validation->size()))
                         : split_validation(data.size(), config.data.validation_split);
  const Dataset& val_names = options.validation ? *options.validation : data;
  SampleStream* const val_stream = options.validation ? options.validation_stream : options.stream;
  if (train_idx.empty())
    throw UserError(config.path + ": no training samples left after validation_split " +
                    std::to_string(config.data.validation_split) + " of " + std::to_string(data.size()) +
                    " pairs; lower data.validation_split or add data");
  std::error_code ec;
  if (voice) fs::create_directories(tc.output_dir, ec);
  if (ec)
    throw UserError("cannot create output folder '" + tc.output_dir + "': " + ec.message() +
                    "; set training.output_dir or --output to a writable folder");
  const fs::path out_dir(tc.output_dir);
  const int towers = trainer.world_towers();
  spdlog::info("training on {} samples, validating on {}; global batch {} over {} tower(s){}", train_idx.size(),
               val_idx.size(), tc.batch_size, towers,
               tc.batch_size_per_device ? fmt::format(" ({} per device)", tc.batch_size_per_device) : "");
  if (tc.batch_size < towers)  // cpu:16 with batch 8 leaves 8 towers idle: said
    spdlog::warn("global batch {} is smaller than the {} towers: {} of them get no sample each step; raise "
                 "training.batch_size to at least {}, or use fewer towers",
                 tc.batch_size, towers, towers - tc.batch_size, towers);
  if (const size_t fixed = trainer.model().num_frozen(); fixed > 0)
    spdlog::info("frozen layers (trainable: false), their {} weight values kept as they are: {}", fixed,
                 fmt::join(trainer.model().frozen_layers(), ", "));
  if (const LearningRateSchedule& ls = tc.optimizer.schedule; !ls.type.empty())
    spdlog::info("learning rate schedule {} over the optimizer's steps; log.csv's learning_rate is the rate of the "
                 "update after each epoch", schedule_text(ls));
  if (const size_t regularized = trainer.regularized_weights())
    spdlog::info("weight regularizers on {} weight(s): their penalty ({:.6g} at these weights) is part of loss and "
                 "val_loss, as in Keras",
                 regularized, trainer.regularization_penalty());
  if (tc.early_stopping.enabled)
    warn_mode_against_monitor(tc.early_stopping.mode_where, tc.early_stopping.monitor, tc.early_stopping.mode);
  if (tc.model_checkpoint.enabled && tc.model_checkpoint.save_best_only)
    warn_mode_against_monitor(tc.model_checkpoint.mode_where, tc.model_checkpoint.monitor, tc.model_checkpoint.mode);
  if (tc.reduce_lr.enabled)
    warn_mode_against_monitor(tc.reduce_lr.mode_where, tc.reduce_lr.monitor, tc.reduce_lr.mode);
  if (const LossConfig& lc = tc.loss;
      lc.function == "binary_focal_crossentropy" && lc.alpha_given && !lc.apply_class_balancing)
    spdlog::warn("{}: alpha {:g} weighs nothing without apply_class_balancing: true (as in Keras); add it to weigh "
                 "the foreground by alpha and the background by 1 - alpha",
                 lc.where, lc.alpha);
  if (!tc.class_weight.empty()) {
    const std::vector<float> table = class_weight_table(tc.class_weight, trainer.classes());
    std::vector<std::string> weights;  // every class's
    for (size_t c = 0; c < table.size(); ++c) weights.push_back(fmt::format("{}: {:g}", c, table[c]));
    spdlog::info("class weights {{{}}} on the training loss (by mask class); val_loss is unweighted, as in Keras",
                 fmt::join(weights, ", "));
  }
  if (const OptimizerConfig& o = tc.optimizer; o.clipnorm > 0)
    spdlog::info("gradient clipping: each weight's gradient to an L2 norm of at most {:g} (clipnorm)", o.clipnorm);
  else if (o.global_clipnorm > 0)
    spdlog::info("gradient clipping: all gradients to an L2 norm of at most {:g} together (global_clipnorm)",
                 o.global_clipnorm);
  else if (o.clipvalue > 0)
    spdlog::info("gradient clipping: each gradient element to [-{0:g}, {0:g}] (clipvalue)", o.clipvalue);
  if (const AugmentationConfig& a = config.data.augmentation; a.any()) {
    std::vector<std::string> kinds;
    if (a.horizontal_flip) kinds.push_back("random left-right flips");
    if (a.vertical_flip) kinds.push_back("random up-down flips");
    if (a.rotate_90) kinds.push_back("random quarter turns");
    if (a.rotation_range > 0) kinds.push_back(fmt::format("rotations up to {:g} degrees", a.rotation_range));
    if (a.width_shift_range > 0 || a.height_shift_range > 0)
      kinds.push_back(fmt::format("shifts up to {:g} x {:g} (width x height; below 1 a fraction)",
                                  a.width_shift_range, a.height_shift_range));
    if (a.shear_range > 0) kinds.push_back(fmt::format("shears up to {:g} degrees", a.shear_range));
    if (a.zoom_low != 1 || a.zoom_high != 1)
      kinds.push_back(fmt::format("zooms in [{:g}, {:g}]", a.zoom_low, a.zoom_high));
    if (a.affine())
      kinds.push_back("fill_mode " + a.fill_mode + (a.fill_mode == "constant" ? fmt::format(" (cval {:g})", a.cval) : ""));
    if (a.brightness()) kinds.push_back(fmt::format("brightness in [{:g}, {:g}]", a.brightness_low, a.brightness_high));
    spdlog::info("augmenting training batches (each image with its mask): {}", fmt::join(kinds, ", "));
  }

  const bool has_val = !val_idx.empty();
  auto needs_val = [&](const std::string& monitor) {
    if (monitor.rfind("val_", 0) == 0 && !has_val)
      throw UserError(config.path + ": monitor '" + monitor +
                      "' needs validation data; set data.validation_split > 0 (or data.validation_images and "
                      "data.validation_masks) or monitor '" + monitor.substr(4) + "'");
  };
  RunState s;
  s.epoch_sums = trainer.empty_stats();
  if (tc.early_stopping.enabled) {
    needs_val(tc.early_stopping.monitor);
    s.early = std::make_unique<EarlyStopping>(tc.early_stopping);
  }
  if (tc.model_checkpoint.enabled) {
    if (tc.model_checkpoint.save_best_only) needs_val(tc.model_checkpoint.monitor);
    s.policy = std::make_unique<CheckpointPolicy>(tc.model_checkpoint);
  }
  if (tc.reduce_lr.enabled) {
    needs_val(tc.reduce_lr.monitor);
    s.reduce_lr = std::make_unique<ReduceLROnPlateau>(tc.reduce_lr);
  }
  if (options.resume) restore(*options.resume, options.resume_path, s, trainer);

  FitResult result;
  result.epochs_run = s.next_epoch - 1;
  if (options.resume) result.last_logs = options.resume->logs;
  const std::string log_path = (out_dir / "log.csv").string();
  // A run resumed in its own folder continues that folder's log; one resumed
  // elsewhere takes the rows of the checkpoint's folder (never those of a run
  // it overwrites with --overwrite).
  std::string earlier_log;
  const std::string run_folder = options.resume_run_folder.empty() && options.resume
                                     ? run_folder_of(options.resume_path, "")  // a caller that did not look
                                     : options.resume_run_folder;
  const bool in_place = options.resume && resumes_in_place(run_folder, tc.output_dir);
  if (in_place)
    earlier_log = log_path;
  else if (const fs::path theirs = fs::path(run_folder) / "log.csv"; options.resume && fs::exists(theirs, ec))
    earlier_log = theirs.string();
  // Resumed in place from a checkpoint before the run's last epoch (with --overwrite): the later epochs go. Not
  // a resume of last.h5 itself, whose log may hold a row more (a process killed between the row and last.h5,
  // before they were written in the other order): its extra rows go, and no file.
  const bool resumes_last = options.resume && fs::equivalent(options.resume_path, out_dir / "last.h5", ec);
  const bool rewinds = voice && in_place && !resumes_last && logged_epochs(out_dir.string()) > result.epochs_run;
  std::optional<CsvLogger> csv;
  if (voice) csv.emplace(log_path, result.epochs_run, earlier_log, result.last_logs);
  if (voice) remove_dead_temporaries(out_dir, tc.model_checkpoint);
  // A run that does not continue its folder's own run (a new run there, a branch from elsewhere, or a rewind
  // to an earlier checkpoint: all need --overwrite) removes the earlier run's checkpoints that it writes under
  // the same names, as log.csv's rows went above: a run killed before its first epoch's end left them beside its
  // own files, and predict would take the old run's final.h5. Never the checkpoint it resumes from.
  if (voice && (!in_place || rewinds)) {
    std::vector<std::string> stale = {"final.h5", "last.h5"}, removed;
    const ModelCheckpointConfig& mc = tc.model_checkpoint;
    if (mc.enabled && mc.filepath.find('{') == std::string::npos) stale.push_back(mc.filepath);
    for (const std::string& name : stale) {  // (initial weights are never read from the output folder)
      const fs::path p = out_dir / name;
      if (!fs::is_regular_file(p, ec) || (options.resume && fs::equivalent(p, options.resume_path, ec))) continue;
      if (fs::remove(p, ec)) removed.push_back(name);
    }
    if (!removed.empty())
      spdlog::info("removed the earlier run's {} from {}: this run writes its own", fmt::join(removed, ", "),
                   out_dir.string());
  }
  std::optional<TensorBoardLogger> tensorboard;
  if (voice && tc.tensorboard.enabled) {
    TensorBoardStart start;
    if (options.resume) {  // the checkpoint's run's events up to it, as log.csv's rows
      start = {(fs::path(run_folder) / tc.tensorboard.log_dir).string(), s.next_epoch - 1, trainer.iterations(), {}};
      start.losses = logged_losses(earlier_log);
    }
    tensorboard.emplace((out_dir / tc.tensorboard.log_dir).string(), tc.tensorboard, start);
    if (tc.tensorboard.write_graph) tensorboard->graph(model_graph_def(trainer.model(), trainer.config().model));
    spdlog::info("TensorBoard: event files in {} (tensorboard --logdir {})", tensorboard->folder(), out_dir.string());
  }
  const std::string last_path = (out_dir / "last.h5").string();
  const size_t batch_size = size_t(tc.batch_size);
  const int pass_steps = int((train_idx.size() + batch_size - 1) / batch_size);  // batches in one pass
  const int steps = tc.steps_per_epoch > 0 ? tc.steps_per_epoch : pass_steps;
  if (tc.steps_per_epoch > 0)
    spdlog::info("an epoch is {} steps (training.steps_per_epoch; a pass over the training set is {})", steps,
                 pass_steps);
  // Named: without training.optimizer it is Keras's default, RMSprop, which a user may not expect.
  if (tc.learning_rate_scaling == "none" && tc.optimizer.schedule.type.empty())
    spdlog::info("optimizer {}, learning rate {:g}", tc.optimizer.type, tc.optimizer.learning_rate);
  else
    spdlog::info("optimizer {}", tc.optimizer.type);
  if (tc.learning_rate_scaling != "none") {
    const double k = trainer.learning_rate_scale();
    const auto warmup = std::llround(tc.learning_rate_warmup_epochs * steps);
    trainer.set_learning_rate_warmup(warmup);
    spdlog::info("learning rate {:g}: learning_rate {:g} x {:g} (learning_rate_scaling {} over {} towers){}",
                 tc.optimizer.learning_rate, tc.optimizer.learning_rate / k, k, tc.learning_rate_scaling, towers,
                 warmup > 0 ? fmt::format(", reached by a linear warm-up from {:g} over the first {} steps ({:g} "
                                          "epoch(s))", tc.optimizer.learning_rate / k, warmup,
                                          tc.learning_rate_warmup_epochs)
                            : "");
  }
  std::optional<Progress> progress;
  if (voice) progress.emplace(options.progress_bar, options.json, tc.epochs, steps, tc.metrics);
  auto remember = [&](const std::string& path) {
    if (std::find(result.files.begin(), result.files.end(), path) == result.files.end()) result.files.push_back(path);
  };

  // The validation data as evaluate reads it: val_names' pairs in memory, or (a stream) this process's
  // share of them, decoded once here.
  Dataset val_own;
  std::vector<int> val_own_idx;
  if (val_stream && has_val) {
    val_own = own_validation(trainer, *val_stream, val_idx, tc.batch_size, val_own_idx);
    spdlog::info("this process's towers validate on {} of the {} validation samples, decoded once", val_own.size(),
                 val_idx.size());
  }
  const Dataset& val_data = val_stream ? val_own : val_names;
  const std::vector<int>& val_indices = val_stream ? val_own_idx : val_idx;

  long long order_pass = 0;  // the pass `order` holds
  std::vector<int> order;
  // out <- the global batch of the run's step g (counted from 0): without steps_per_epoch the pass is the
  // epoch and the batch the step; with it, step g takes batch g % P of pass g / P + 1, P the batches of a pass.
  auto batch_at = [&](long long g, std::vector<int>& out) {
    const long long pass = g / pass_steps + 1;
    if (pass != order_pass) order = epoch_order(train_idx, tc.seed, int(pass), config.data.shuffle), order_pass = pass;
    const size_t b = size_t(g % pass_steps) * batch_size;
    out.assign(order.begin() + long(b), order.begin() + long(std::min(order.size(), b + batch_size)));
  };
  std::vector<int> batch, next_batch, own_batch, own_idx;  // kept across steps: no allocation once warm
  Decoded decoded;  // with a stream: this epoch's
  for (int epoch = s.next_epoch; epoch <= tc.epochs; ++epoch) {
    if (progress) progress->start_epoch(epoch);
    const auto t0 = std::chrono::steady_clock::now();
    auto epoch_time = [&] {
      return s.epoch_seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    for (int step = s.next_step; step < steps; ++step) {
      // With steps_per_epoch, g counts the optimizer's iterations (so also after a resume with another
      // steps_per_epoch).
      const long long g = tc.steps_per_epoch > 0 ? (long long)trainer.iterations() : (long long)(epoch - 1) * steps + step;
      const auto t_step = std::chrono::steady_clock::now();
      batch_at(g, batch);
      BatchStats st;
      if (options.stream) {  // this process's samples of the batch; the next step's decode meanwhile
        const auto t_wait = std::chrono::steady_clock::now();
        own_pairs(trainer, batch, own_batch);
        const Dataset& own = options.stream->take(own_batch);
        decoded.wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_wait).count();
        decoded.samples += own.size();
        if (epoch < tc.epochs || step + 1 < steps) {
          batch_at(g + 1, next_batch);
          own_pairs(trainer, next_batch, own_batch);
          options.stream->prefetch(own_batch);
        }
        own_indices(trainer, int(batch.size()), own_idx);
        st = trainer.train_step(own, own_idx);
      } else {
        st = trainer.train_step(data, batch);
      }
      if (!std::isfinite(st.loss()))  // the loss reduced over the world: every process stops here
        throw_alike(options.world, "loss became " + std::to_string(st.loss()) + " at epoch " +
                                       std::to_string(epoch) + ", step " + std::to_string(step + 1) +
                                       "; lower training.optimizer.learning_rate (checkpoints written so far are "
                                       "kept)");
      s.epoch_sums.add(st);
      if (tensorboard && tensorboard->wants_batch(trainer.iterations())) {  // the logs built only when written
        std::map<std::string, double> so_far;
        add_logs(so_far, "", s.epoch_sums, tc.metrics);
        tensorboard->on_train_batch_end(
            trainer.iterations(), so_far,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t_step).count());
      }
      if (progress) progress->step(step + 1, s.epoch_sums.loss());
      if (const int signal = step + 1 < steps ? stop_signal() : 0) {
        trainer.synchronize();  // the last steps' collectives polled, with their timeout, before the weights are read
        s.next_epoch = epoch;
        s.next_step = step + 1;
        s.epoch_seconds = epoch_time();
        result.stop_signal = signal;
        remember(save(last_path, make_checkpoint(config, trainer, epoch - 1, result.last_logs, s), epoch,
                      options.world));
        spdlog::warn("stopped by signal {} at epoch {}, step {}; {}", result.stop_signal, epoch, step + 1,
                     continue_with(options, last_path));
        return result;
      }
    }
    // The epoch's last collectives end here, polled with their timeout: reading weights or metrics back from a GPU
    // waits on its stream alone, which would wait for ever on a collective that a failed peer left unfinished.
    trainer.synchronize();
    const double seconds_training = epoch_time();
    std::map<std::string, double> logs;
    add_logs(logs, "", s.epoch_sums, tc.metrics);
    if (has_val) add_logs(logs, "val_", trainer.evaluate(val_data, val_indices, tc.batch_size), tc.metrics);
    if (s.reduce_lr) logs["learning_rate"] = trainer.learning_rate();  // this epoch's, as Keras 3 logs it
    // As Keras reads optimizer.learning_rate: the next update's (a schedule's, or a warm-up's).
    if (!tc.optimizer.schedule.type.empty() || tc.learning_rate_warmup_epochs > 0)
      logs["learning_rate"] = trainer.learning_rate_at(trainer.iterations());
    const double seconds = epoch_time(), samples_per_second = s.epoch_sums.samples / seconds_training;
    result.epochs_run = epoch;
    result.last_logs = logs;
    s.epoch_sums = trainer.empty_stats();
    s.epoch_seconds = 0;
    s.next_step = 0;
    s.next_epoch = epoch + 1;

    bool stop = false;
    if (s.early) {
      stop = s.early_stopped = s.early->on_epoch_end(epoch, logs.at(tc.early_stopping.monitor));
      if (s.early->improved() && tc.early_stopping.restore_best_weights) {
        s.best_params = trainer.params(0);
        s.best_state = trainer.state(0);
        s.best_logs = logs;
      }
    }
    std::string reduced;  // said after the epoch's line
    if (s.reduce_lr) {
      const double lr = trainer.learning_rate(), next = s.reduce_lr->on_epoch_end(logs.at(tc.reduce_lr.monitor), lr);
      if (next != lr) {
        trainer.set_learning_rate(next);
        reduced = fmt::format("epoch {}: ReduceLROnPlateau: {} did not improve (patience {}); learning rate {:g} -> "
                              "{:g}", epoch, tc.reduce_lr.monitor, tc.reduce_lr.patience, lr, next);
      }
    }
    // The files of the epoch, in an order that a process killed between any two of them (or a full disk) leaves
    // consistent for --resume (from a batch-job trial: log.csv one epoch ahead of last.h5 made the resume take
    // the run for one going back, and remove its best.h5): the ModelCheckpoint file, whose policy state last.h5
    // holds; last.h5; then log.csv's row, which a resume from last.h5 writes again if it is missing; and only
    // then the epoch's line and TensorBoard values, so that a script seeing the line finds the files written.
    const bool save_now =
        s.policy && (!tc.model_checkpoint.save_best_only || s.policy->should_save(logs.at(tc.model_checkpoint.monitor)));
    const Checkpoint ckpt = make_checkpoint(config, trainer, epoch, logs, s);
    std::string saved;
    if (save_now) {
      std::string name;
      try {
        name = format_filepath(tc.model_checkpoint.filepath, epoch, logs);
      } catch (const UserError& e) {
        throw UserError(tc.model_checkpoint.where + ": " + e.what() + " (" + last_path + " holds the epoch before)");
      }
      saved = (out_dir / name).string();
      remember(save(saved, tc.model_checkpoint.save_weights_only ? weights_only(ckpt) : ckpt, epoch, options.world));
    }
    remember(save(last_path, ckpt, epoch, options.world));
    run_on_root(options.world, [&] { csv->log(epoch, logs); });  // a failed row: an error on every process
    remember(log_path);
    if (progress) progress->end_epoch(logs, seconds, samples_per_second);
    log_towers(epoch, trainer, options.stream ? std::optional<Decoded>(decoded) : std::nullopt);
    decoded = {};
    if (!reduced.empty()) spdlog::info("{}", reduced);
    if (!saved.empty()) spdlog::info("epoch {}: saved {}", epoch, saved);
    if (tensorboard) {  // epoch_learning_rate: log.csv's learning_rate where it has one, else the rate
      tensorboard->on_epoch_end(epoch, trainer.iterations(), logs,
                                logs.count("learning_rate") ? logs.at("learning_rate")
                                                            : trainer.learning_rate_at(trainer.iterations()),
                                steps / seconds_training,
                                tensorboard->wants_weights(epoch) ? trainer.weights() : std::vector<WeightRecord>{});
      remember(tensorboard->folder());
    }
    if (stop) {
      const int wait = s.early->wait();  // watched epochs without improvement: patience's, or more after a resume
      const std::string epochs_waited = std::to_string(wait) + (wait == 1 ? " epoch" : " epochs");
      if (s.early->below_baseline())
        spdlog::info("early stopping at epoch {}: {} did not beat the baseline {:g} in {} (best {:.4f} at "
                     "epoch {})", epoch, tc.early_stopping.monitor, *tc.early_stopping.baseline, epochs_waited,
                     s.early->best(), s.early->best_epoch());
      else
        spdlog::info("early stopping at epoch {}: {} did not improve for {} (best {:.4f} at epoch {})", epoch,
                     tc.early_stopping.monitor, epochs_waited, s.early->best(), s.early->best_epoch());
      result.stopped_early = true;
      break;
    }
    // After the last epoch the run is done: a stop asked for now still gets final.h5 (from a multi-process trial:
    // it was left without one, and --resume then found nothing to train).
    if (const int signal = epoch < tc.epochs ? stop_signal() : 0) {
      result.stop_signal = signal;
      spdlog::warn("stopped by signal {} after epoch {}; {}", result.stop_signal, epoch,
                   continue_with(options, last_path));
      return result;
    }
  }
  result.files.push_back(save_final(config, trainer, result.epochs_run, result.last_logs, s, options.world));
  return result;
}

bool lacks_final(const std::string& output_dir, const std::string& checkpoint, const Checkpoint& ckpt) {
  std::error_code ec;
  const fs::path out(output_dir);
  const auto next_step = ckpt.state_scalars.find("next_step");
  return fs::equivalent(checkpoint, out / "last.h5", ec) &&  // the run's own last word, not an earlier checkpoint
         (next_step == ckpt.state_scalars.end() || next_step->second == 0) &&  // at an epoch's end
         logged_epochs(output_dir) <= ckpt.epoch && !fs::exists(out / "final.h5", ec);
}

std::string finish_ended_run(const Config& config, Trainer& trainer, const Checkpoint& ckpt, const std::string& source,
                             ProcessGroup* world) {
  const bool voice = !world || world->rank() == 0;
  RunState s;
  restore_best(ckpt, source, s, trainer);
  if (config.training.early_stopping.enabled) {
    s.early = std::make_unique<EarlyStopping>(config.training.early_stopping);
    const auto best = ckpt.state_scalars.find("early_stopping_best");
    const auto best_epoch = ckpt.state_scalars.find("early_stopping_best_epoch");
    if (best != ckpt.state_scalars.end() && best_epoch != ckpt.state_scalars.end() && best_epoch->second >= 1 &&
        best_epoch->second <= ckpt.epoch)
      s.early->restore(best->second, int(best_epoch->second), 0);
    else
      s.best_params.clear();  // no best epoch to name: the checkpoint's own weights
  }
  if (voice) spdlog::info("{} holds no final.h5 (a process ended before writing it): written from its last.h5",
                          config.training.output_dir);
  return save_final(config, trainer, ckpt.epoch, ckpt.logs, s, world);
}

}  // namespace trainer
