#include "train/fit.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <tuple>

#include "core/error.h"
#include "core/shell_word.h"
#include "dist/root_work.h"
#include "train/callbacks/registry.h"
#include "train/progress.h"
#include "train/run_announcement.h"
#include "train/run_folder.h"
#include "train/tiled_predict.h"

namespace trainer {

namespace fs = std::filesystem;

namespace {

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

std::vector<int> crop_ids(const std::vector<int>& train, int per_image) {
  if (!train.empty() && (long long)(*std::max_element(train.begin(), train.end()) + 1) * per_image > INT_MAX)
    throw UserError("data.crop.per_image " + std::to_string(per_image) + " times " + std::to_string(train.size()) +
                    " training images is more crops than a pass can number (2^31); lower per_image");
  std::vector<int> ids;
  ids.reserve(train.size() * size_t(per_image));
  for (int i : train)
    for (int d = 0; d < per_image; ++d) ids.push_back(i * per_image + d);
  return ids;
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
/// Nothing when no tower waited 0.1 s or more (a CPU tower's copy of a few
/// batches takes milliseconds), none is a GPU and no stream decoded.
void log_towers(int epoch, Trainer& trainer, const std::optional<Decoded>& decoded) {
  std::string waits, peaks;
  bool waited = false;
  for (double w : trainer.take_input_wait_seconds()) {
    waits += fmt::format("{}{:.2f} s", waits.empty() ? "" : ", ", w);
    waited = waited || w >= 0.1;
  }
  for (size_t b : trainer.peak_memory_bytes())
    if (b) peaks += fmt::format("{}{:.1f} GiB", peaks.empty() ? "" : ", ", double(b) / double(1 << 30));
  if (!waited && peaks.empty() && !decoded) return;
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

/// The loop's own state beyond the towers and the callbacks: where the run continues and the unfinished
/// epoch's sums, which a checkpoint holds to resume.
struct RunState {
  int next_epoch = 1, next_step = 0;  ///< Where the run continues.
  BatchStats epoch_sums;              ///< Sums of the unfinished epoch's steps.
  double epoch_seconds = 0;           ///< Training time of those steps.
  std::vector<std::unique_ptr<Callback>> callbacks;
};

/// A checkpoint of the current weights, logs and (for resuming) everything in s and its callbacks.
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
  for (const auto& cb : s.callbacks) cb->save_state(c);
  return c;
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
/// epochs (logs: that epoch's), as the callbacks' on_train_end leave them (EarlyStopping's best weights).
std::string save_final(const Config& config, Trainer& trainer, int epochs_run, const std::map<std::string, double>& logs,
                       const std::vector<std::unique_ptr<Callback>>& callbacks, ProcessGroup* world) {
  Checkpoint final_ckpt;
  final_ckpt.config_yaml = config.text;
  final_ckpt.epoch = epochs_run;
  final_ckpt.logs = logs;
  // The epochs its run had trained (epoch may become the best one's): a later finish tells a stale final.h5.
  final_ckpt.state_scalars["trained_epochs"] = epochs_run;
  for (const auto& cb : callbacks) cb->on_train_end(trainer, final_ckpt);
  final_ckpt.weights = trainer.weights();
  return save((fs::path(config.training.output_dir) / "final.h5").string(), final_ckpt, epochs_run, world);
}

/// Restores the unfinished epoch's metric counts from r into counts (zeros at an epoch's end). A checkpoint
/// of a run with or without `auc` among its metrics gives this run's counts but the AUC's histogram, which
/// (within an epoch: a warning says so) then counts the epoch's steps from here. UserError for counts no run
/// writes.
void restore_counts(const StateReader& r, const Trainer& trainer, bool mid_epoch, std::vector<double>& counts) {
  const Checkpoint& c = r.checkpoint();
  const size_t histogram = 2 * MetricCounts::kAucThresholds;
  const size_t shared = counts.size() - (trainer.empty_stats().counts.has_auc() ? histogram : 0);
  const auto stored = c.state_double_arrays.find("epoch_counts");
  if (stored == c.state_double_arrays.end()) {  // older checkpoints: binary counts as scalars
    for (size_t i = 0; i < shared; ++i) counts[i] = r.scalar("epoch_count_" + std::to_string(i), 0, 1e18);
    return;
  }
  const std::vector<double>& v = stored->second;
  for (size_t i = 0; i < v.size(); ++i)
    if (!(v[i] >= 0 && v[i] <= 1e18 && v[i] == std::floor(v[i])))
      r.damaged("training state 'epoch_counts' entry " + std::to_string(i) + " is " + fmt::format("{}", v[i]) +
                ", which no run writes");
  const bool auc_changed = v.size() != counts.size() && (v.size() == shared || v.size() == shared + histogram);
  if (v.size() != counts.size() && !auc_changed)
    r.damaged("training state 'epoch_counts' holds " + std::to_string(v.size()) + " metric counts where this model "
              "keeps " + std::to_string(counts.size()) +
              (trainer.classes() > 0 ? " (for its " + std::to_string(trainer.classes()) + " classes)" : ""));
  std::copy(v.begin(), v.begin() + long(std::min(v.size(), counts.size())), counts.begin());
  if (auc_changed && mid_epoch && counts.size() > shared)
    spdlog::warn("{} was taken within an epoch by a run without 'auc' among training.metrics: this epoch's auc "
                 "counts its steps from here on", r.source());
}

/// Restores s and its callbacks from a checkpoint written by make_checkpoint.
/// UserError naming the file and the value for state that is missing or
/// could not have been written by a run (a damaged or edited file).
void restore(const StateReader& r, RunState& s, Trainer& trainer) {
  s.next_epoch = r.count("next_epoch", 1);
  s.next_step = r.count("next_step", 0);
  const TrainingConfig& tc = trainer.config().training;
  const Checkpoint& c = r.checkpoint();
  if (auto b = c.state_scalars.find("global_batch_size"); b != c.state_scalars.end() && b->second != tc.batch_size)
    spdlog::warn("{}'s run trained with a global batch of {:g}; this one uses {} ({} tower(s){}): its steps, and "
                 "with learning_rate_scaling its learning rate ({:g}, was {:g}), differ from the stopped run's",
                 r.source(), b->second, tc.batch_size, trainer.world_towers(),
                 tc.batch_size_per_device ? fmt::format(" x batch_size_per_device {}", tc.batch_size_per_device) : "",
                 tc.optimizer.learning_rate,
                 c.state_scalars.count("learning_rate_resolved") ? c.state_scalars.at("learning_rate_resolved")
                                                                 : tc.optimizer.learning_rate);
  s.epoch_sums.loss_sum = r.scalar("epoch_loss_sum", 0, 1e300);
  s.epoch_sums.samples = r.scalar("epoch_samples", 0, 1e18);
  s.epoch_seconds = r.scalar("epoch_seconds", 0, 1e18);
  // A run stopped within an epoch saved the sums of its steps; one stopped at an epoch's end, none.
  if ((s.next_step > 0) != (s.epoch_sums.samples > 0))
    r.damaged("training state 'next_step' is " + std::to_string(s.next_step) + " with 'epoch_samples' " +
              fmt::format("{}", s.epoch_sums.samples) +
              ", which no run writes (the steps done in an epoch and their samples go together)");
  restore_counts(r, trainer, s.next_step > 0, s.epoch_sums.counts.v);
  for (const auto& cb : s.callbacks) cb->restore_state(r);
  spdlog::info("resuming from {}: epoch {}, step {}", r.source(), s.next_epoch, s.next_step);
}

/// The training steps of a run: the global batch of each step, in the order
/// epoch_order gives every pass over the training samples.
class Batches {
 public:
  Batches(std::vector<int> train, const Config& config, int batch_size)
      : train_(std::move(train)), seed_(config.training.seed), shuffle_(config.data.shuffle),
        batch_size_(size_t(batch_size)), pass_steps_(int((train_.size() + batch_size_ - 1) / batch_size_)) {}
  /// Batches in one pass over the training samples.
  int pass_steps() const { return pass_steps_; }
  /// The pass (1-based) that step g takes its batch from.
  long long pass_of(long long g) const { return g / pass_steps_ + 1; }
  /// out <- the global batch of the run's step g (counted from 0): without steps_per_epoch the pass is the
  /// epoch and the batch the step; with it, step g takes batch g % P of pass g / P + 1, P = pass_steps().
  void at(long long g, std::vector<int>& out) {
    const long long pass = pass_of(g);
    if (pass != order_pass_) order_ = epoch_order(train_, seed_, int(pass), shuffle_), order_pass_ = pass;
    const size_t b = size_t(g % pass_steps_) * batch_size_;
    out.assign(order_.begin() + long(b), order_.begin() + long(std::min(order_.size(), b + batch_size_)));
  }

 private:
  std::vector<int> train_;
  uint64_t seed_;
  bool shuffle_;
  size_t batch_size_;
  int pass_steps_;
  long long order_pass_ = 0;  ///< The pass order_ holds.
  std::vector<int> order_;
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// One fit() call (fit.h): the state its parts share.
class FitLoop {
 public:
  FitLoop(const Config& config, Trainer& trainer, const Dataset& data, const FitOptions& options);
  FitResult run();

 private:
  /// The signal that asks for a stop, agreed by every process (the largest any of them caught), so that all
  /// stop at the same step; 0: none.
  int stop_signal() const;
  /// Logs the steps per epoch and the optimizer; starts learning_rate_scaling's warm-up.
  void set_up_steps_and_rate();
  /// The validation data as evaluate reads it: the pairs in memory, or (a stream) this process's share,
  /// decoded once here.
  void set_up_validation();
  /// Trains epoch's steps from s_.next_step (t0: the epoch's start); returns the signal that stopped the run
  /// within the epoch, its last.h5 written (0: the epoch's steps are done).
  int train_steps(int epoch, Clock::time_point t0);
  /// One training step of global step g; returns its stats over the world.
  BatchStats step(int epoch, int step, long long g);
  /// The finished epoch's logs: the training sums, validation (on the epochs validation_freq names), the
  /// callbacks' entries and the learning rate.
  std::map<std::string, double> epoch_logs(int epoch);
  /// The epoch's callbacks and files, in an order that a process killed between any two (or a full disk)
  /// leaves consistent for --resume: the callbacks' decisions and files (a ModelCheckpoint file, whose
  /// state last.h5 holds), last.h5, log.csv's row (a resume from last.h5 writes it again if it is missing),
  /// and only then the epoch's line and what follows it, so that a script seeing the line finds the files.
  /// Returns whether a callback ended the run.
  bool end_epoch(int epoch, Clock::time_point t0);
  void remember(const std::string& path);

  const Config& config_;
  Trainer& trainer_;
  const Dataset& data_;
  const FitOptions& options_;
  const TrainingConfig& tc_;  ///< The batch and learning rate resolved for the towers.
  const bool voice_;           ///< This process prints and writes.
  std::vector<int> train_idx_, val_idx_;
  RunState s_;
  std::optional<RunFolder> folder_;
  std::optional<Batches> batches_;
  int steps_ = 0;  ///< Steps per epoch.
  std::optional<Progress> progress_;
  Dataset val_own_;
  std::vector<int> val_own_idx_;
  FitResult result_;
  std::vector<int> batch_, next_batch_, own_batch_, own_idx_;  // kept across steps: no allocation once warm
  Decoded decoded_;  ///< With a stream: this epoch's.
  std::optional<CropSampler> crops_;   ///< data.crop: the batches hold crop ids (data/crops.h).
  Dataset crop_batch_;                 ///< The step's crops.
};

FitLoop::FitLoop(const Config& config, Trainer& trainer, const Dataset& data, const FitOptions& options)
    : config_(config), trainer_(trainer), data_(data), options_(options), tc_(trainer.config().training),
      voice_(!options.world || options.world->rank() == 0) {
  // Validation folders (Keras's validation_data): every pair trains; else validation_split decides.
  std::tie(train_idx_, val_idx_) =
      options.validation ? std::make_pair(every_index(data.size()), every_index(options.validation->size()))
                         : split_validation(data.size(), config.data.validation_split);
  if (train_idx_.empty())
    throw UserError(config.path + ": no training samples left after validation_split " +
                    std::to_string(config.data.validation_split) + " of " + std::to_string(data.size()) +
                    " pairs; lower data.validation_split or add data");
  folder_.emplace(tc_, voice_, RunFolder::Resume{options.resume, options.resume_path, options.resume_run_folder});
  announce_run(config, trainer, train_idx_.size(), val_idx_.size());
  CallbackSetup setup{&config, &trainer, voice_, !val_idx_.empty(), tc_.output_dir, options.resume != nullptr,
                      folder_->run_folder(), folder_->earlier_log()};
  s_.epoch_sums = trainer.empty_stats();
  s_.callbacks = make_callbacks(setup);
  s_.next_epoch = tc_.initial_epoch + 1;  // Keras's fit(initial_epoch); a resume continues where it stopped
  if (options.resume) restore(StateReader(*options.resume, options.resume_path), s_, trainer);
  if (options.resume && tc_.initial_epoch > 0)
    spdlog::info("training.initial_epoch {} is not used: the run continues where {} stopped", tc_.initial_epoch,
                 options.resume_path);
  else if (tc_.initial_epoch > 0)
    spdlog::info("starting at epoch {} of {} (training.initial_epoch {})", s_.next_epoch, tc_.epochs,
                 tc_.initial_epoch);
  result_.epochs_run = s_.next_epoch - 1;
  if (options.resume) result_.last_logs = options.resume->logs;
  folder_->prepare(result_.epochs_run, result_.last_logs);
  for (const auto& cb : s_.callbacks) cb->on_train_begin(TrainBegin{s_.next_epoch - 1, trainer.iterations()});
  if (const auto& c = config.data.crop) {
    const Shape in = trainer.model().input_shape();
    crops_.emplace(data, CropSampling{cv::Size(in.w, in.h), c->foreground, c->per_image, tc_.seed});
  }
  batches_.emplace(crops_ ? crop_ids(train_idx_, crops_->sampling().per_image) : train_idx_, config, tc_.batch_size);
  set_up_steps_and_rate();
  if (voice_) progress_.emplace(options.progress_bar, options.json, tc_.epochs, steps_, tc_.metrics);
  set_up_validation();
}

int FitLoop::stop_signal() const {
  double v = options_.stop ? double(options_.stop->load()) : 0.0;
  if (options_.world && options_.world->size() > 1) options_.world->all_reduce_max(&v, 1);
  return int(v);
}

void FitLoop::set_up_steps_and_rate() {
  const int pass_steps = batches_->pass_steps();
  steps_ = tc_.steps_per_epoch > 0 ? tc_.steps_per_epoch : pass_steps;
  if (tc_.steps_per_epoch > 0)
    spdlog::info("an epoch is {} steps (training.steps_per_epoch; a pass over the training set is {})", steps_,
                 pass_steps);
  // Named: without training.optimizer it is Keras's default, RMSprop, which a user may not expect.
  if (tc_.learning_rate_scaling == LearningRateScaling::None && tc_.optimizer.schedule.type == ScheduleKind::None)
    spdlog::info("optimizer {}, learning rate {:g}", optimizer_name(tc_.optimizer.type), tc_.optimizer.learning_rate);
  else
    spdlog::info("optimizer {}", optimizer_name(tc_.optimizer.type));
  if (tc_.learning_rate_scaling == LearningRateScaling::None) return;
  const double k = trainer_.learning_rate_scale();
  const auto warmup = std::llround(tc_.learning_rate_warmup_epochs * steps_);
  trainer_.set_learning_rate_warmup(warmup);
  spdlog::info("learning rate {:g}: learning_rate {:g} x {:g} (learning_rate_scaling {} over {} towers){}",
               tc_.optimizer.learning_rate, tc_.optimizer.learning_rate / k, k, scaling_name(tc_.learning_rate_scaling),
               trainer_.world_towers(),
               warmup > 0 && k != 1 ? fmt::format(", reached by a linear warm-up from {:g} over the first {} steps ({:g} "
                                        "epoch(s))", tc_.optimizer.learning_rate / k, warmup,
                                        tc_.learning_rate_warmup_epochs)
                          : "");
}

void FitLoop::set_up_validation() {
  SampleStream* const stream = options_.validation ? options_.validation_stream : options_.stream;
  if (!stream || val_idx_.empty()) return;
  val_own_ = own_validation(trainer_, *stream, val_idx_, tc_.batch_size, val_own_idx_);
  spdlog::info("this process's towers validate on {} of the {} validation samples, decoded once", val_own_.size(),
               val_idx_.size());
}

void FitLoop::remember(const std::string& path) {
  if (std::find(result_.files.begin(), result_.files.end(), path) == result_.files.end()) result_.files.push_back(path);
}

BatchStats FitLoop::step(int epoch, int step, long long g) {
  batches_->at(g, batch_);
  if (crops_) {  // one process (load_training_data): every crop of the batch, position k at sample k
    crops_->take(batches_->pass_of(g), batch_, crop_batch_);
    own_idx_.resize(batch_.size());
    std::iota(own_idx_.begin(), own_idx_.end(), 0);
    return trainer_.train_step(crop_batch_, own_idx_);
  }
  if (!options_.stream) return trainer_.train_step(data_, batch_);
  // This process's samples of the batch; the next step's decode meanwhile.
  const auto t_wait = Clock::now();
  own_pairs(trainer_, batch_, own_batch_);
  const Dataset& own = options_.stream->take(own_batch_);
  decoded_.wait += seconds_since(t_wait);
  decoded_.samples += own.size();
  if (epoch < tc_.epochs || step + 1 < steps_) {
    batches_->at(g + 1, next_batch_);
    own_pairs(trainer_, next_batch_, own_batch_);
    options_.stream->prefetch(own_batch_);
  }
  own_indices(trainer_, int(batch_.size()), own_idx_);
  return trainer_.train_step(own, own_idx_);
}

int FitLoop::train_steps(int epoch, Clock::time_point t0) {
  for (int k = s_.next_step; k < steps_; ++k) {
    // With steps_per_epoch, g counts the optimizer's iterations (so also after a resume with another
    // steps_per_epoch).
    const long long g = tc_.steps_per_epoch > 0 ? (long long)trainer_.iterations() : (long long)(epoch - 1) * steps_ + k;
    const auto t_step = Clock::now();
    const BatchStats st = step(epoch, k, g);
    if (!std::isfinite(st.loss()))  // the loss reduced over the world: every process stops here
      throw_alike(options_.world, "loss became " + std::to_string(st.loss()) + " at epoch " + std::to_string(epoch) +
                                      ", step " + std::to_string(k + 1) +
                                      "; lower training.optimizer.learning_rate (checkpoints written so far are kept)");
    s_.epoch_sums.add(st);
    const BatchEnd b{trainer_.iterations(), [&] {
                       std::map<std::string, double> so_far;
                       add_logs(so_far, "", s_.epoch_sums, tc_.metrics);
                       return so_far;
                     },
                     seconds_since(t_step)};
    for (const auto& cb : s_.callbacks) cb->on_train_batch_end(b);
    if (progress_) progress_->step(k + 1, s_.epoch_sums.loss());
    const int signal = k + 1 < steps_ ? stop_signal() : 0;
    if (!signal) continue;
    trainer_.synchronize();  // the last steps' collectives polled, with their timeout, before the weights are read
    s_.next_epoch = epoch;
    s_.next_step = k + 1;
    s_.epoch_seconds += seconds_since(t0);
    const std::string last = folder_->last_path();
    remember(save(last, make_checkpoint(config_, trainer_, epoch - 1, result_.last_logs, s_), epoch, options_.world));
    spdlog::warn("stopped by signal {} at epoch {}, step {}; {}", signal, epoch, k + 1, continue_with(options_, last));
    return signal;
  }
  return 0;
}

std::map<std::string, double> FitLoop::epoch_logs(int epoch) {
  std::map<std::string, double> logs;
  add_logs(logs, "", s_.epoch_sums, tc_.metrics);
  if (!val_idx_.empty() && tc_.validates(epoch)) {
    const bool own = options_.validation ? options_.validation_stream : options_.stream;
    const Dataset& val = own ? val_own_ : options_.validation ? *options_.validation : data_;
    add_logs(logs, "val_",
             crops_ ? evaluate_native(trainer_, val, val_idx_, crop_tiles(*config_.data.crop, tc_.batch_size))
                    : trainer_.evaluate(val, own ? val_own_idx_ : val_idx_, tc_.batch_size),
             tc_.metrics);
  }
  for (const auto& cb : s_.callbacks) cb->add_logs(logs);
  // As Keras reads optimizer.learning_rate: the next update's (a schedule's, or a warm-up's).
  if (tc_.optimizer.schedule.type != ScheduleKind::None || tc_.learning_rate_warmup_epochs > 0)
    logs["learning_rate"] = trainer_.learning_rate_at(trainer_.iterations());
  return logs;
}

bool FitLoop::end_epoch(int epoch, Clock::time_point t0) {
  // The epoch's last collectives end here, polled with their timeout: reading weights or metrics back from a GPU
  // waits on its stream alone, which would wait for ever on a collective that a failed peer left unfinished.
  trainer_.synchronize();
  const double seconds_training = s_.epoch_seconds + seconds_since(t0);
  std::map<std::string, double> logs = epoch_logs(epoch);
  const double seconds = s_.epoch_seconds + seconds_since(t0), samples_per_second = s_.epoch_sums.samples / seconds_training;
  result_.epochs_run = epoch;
  result_.last_logs = logs;
  s_.epoch_sums = trainer_.empty_stats();
  s_.epoch_seconds = 0;
  s_.next_step = 0;
  s_.next_epoch = epoch + 1;
  std::optional<Checkpoint> ckpt;
  EpochEnd e{epoch, logs, trainer_,
             [&]() -> const Checkpoint& {
               if (!ckpt) ckpt = make_checkpoint(config_, trainer_, epoch, logs, s_);
               return *ckpt;
             },
             [&](const std::string& path, const Checkpoint& c) { remember(save(path, c, epoch, options_.world)); },
             [&](const std::string& path) { remember(path); }, trainer_.iterations(), steps_ / seconds_training, false,
             {}};
  for (const auto& cb : s_.callbacks) cb->on_epoch_end(e);
  e.save(folder_->last_path(), e.checkpoint());
  folder_->log_row(epoch, logs, options_.world);  // a failed row: an error on every process
  remember(folder_->log_path());
  if (progress_) progress_->end_epoch(logs, seconds, samples_per_second);
  log_towers(epoch, trainer_, options_.stream ? std::optional<Decoded>(decoded_) : std::nullopt);
  decoded_ = {};
  for (const auto& cb : s_.callbacks) cb->on_epoch_logged(e);
  if (e.stop) spdlog::info("{}", e.stop_message);
  return e.stop;
}

FitResult FitLoop::run() {
  for (int epoch = s_.next_epoch; epoch <= tc_.epochs; ++epoch) {
    if (progress_) progress_->start_epoch(epoch);
    const auto t0 = Clock::now();
    if ((result_.stop_signal = train_steps(epoch, t0))) return result_;
    if (end_epoch(epoch, t0)) {
      result_.stopped_early = true;
      break;
    }
    // After the last epoch the run is done: a stop asked for now still gets final.h5.
    if (const int signal = epoch < tc_.epochs ? stop_signal() : 0) {
      result_.stop_signal = signal;
      spdlog::warn("stopped by signal {} after epoch {}; {}", signal, epoch,
                   continue_with(options_, folder_->last_path()));
      return result_;
    }
  }
  result_.files.push_back(save_final(config_, trainer_, result_.epochs_run, result_.last_logs, s_.callbacks,
                                     options_.world));
  return result_;
}

}  // namespace

std::string continue_with(const FitOptions& options, const std::string& last) {
  const bool several = options.world && options.world->size() > 1;
  return std::string("continue with") + (several ? ", as each process of the same mpirun or srun launch" : "") +
         ": " + (options.continue_command.empty() ? "" : options.continue_command + " ") + "--resume " +
         shell_word(last);
}






FitResult fit(const Config& config, Trainer& trainer, const Dataset& data, const FitOptions& options) {
  return FitLoop(config, trainer, data, options).run();
}

std::string finish_ended_run(const Config& config, Trainer& trainer, const Checkpoint& ckpt, const std::string& source,
                             ProcessGroup* world) {
  const bool voice = !world || world->rank() == 0;
  std::vector<std::unique_ptr<Callback>> callbacks;
  if (auto early = ended_run_early_stopping(config, trainer, ckpt, source)) callbacks.push_back(std::move(early));
  if (voice) {
    spdlog::info("{} holds no final.h5 of its last epoch (a process ended before writing it): written from its "
                 "last.h5", config.training.output_dir);
    remove_dead_temporaries(config.training.output_dir, config.training.model_checkpoint);
  }
  return save_final(config, trainer, ckpt.epoch, ckpt.logs, callbacks, world);
}

}  // namespace trainer
