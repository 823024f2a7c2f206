// run_train: the training command's steps, in the order they run. Each step
// that can fail on one process of a run of several is checked together
// (check_together), so that all stop alike; rank 0 alone prints and writes.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "commands.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/json_text.h"
#include "core/shell_word.h"
#include "data/image_header.h"
#include "io/checkpoint.h"
#include "nn/model.h"
#include "nn/registry.h"
#include "train/callbacks/registry.h"
#include "train/fit.h"
#include "train/initial_weights.h"
#include "train/output_folder.h"
#include "train/resume.h"
#include "train_data.h"
#include "train_flags.h"
#include "world_checks.h"

namespace trainer::cli {

namespace {

/// The --log-format json line that ends a run: done (the run reached its end: its epochs, or early stopping;
/// not stopped by a signal), the epochs trained, and the files written.
void print_json_result(const FitResult& r) {
  std::printf("{\"done\": %s, \"epochs_run\": %d, \"stopped_early\": %s, \"stop_signal\": %d, \"files\": [",
              r.stop_signal ? "false" : "true", r.epochs_run, r.stopped_early ? "true" : "false", r.stop_signal);
  for (size_t i = 0; i < r.files.size(); ++i) std::printf("%s%s", i ? ", " : "", json_string(r.files[i]).c_str());
  std::printf("]}\n");
}

/// A process of an MPI run other than rank 0: its log keeps errors only, each naming the process (rank 0
/// speaks for the run; the others would repeat it).
void quiet_follower(const ProcessGroup& world) {
  spdlog::set_level(spdlog::level::err);
  spdlog::set_pattern("[%H:%M:%S] rank " + std::to_string(world.rank()) + " (" + world.host() + "): %^%l%$: %v");
}

/// Rank 0 logs the run's processes once: each one's host and towers, e.g.
/// "world: 2 processes, 2 towers (global batch split over all): rank 0 on a (1 CPU tower), rank 1 on b (...)".
void log_world(ProcessGroup& world, const DevicePlan& plan, const Trainer& trainer) {
  const std::vector<std::string> each = world.all_gather(world.host() + " (" + plan.describe() + ")");
  std::string list;
  for (size_t r = 0; r < each.size(); ++r) list += fmt::format("{}rank {} on {}", r ? ", " : "", r, each[r]);
  spdlog::info("world: {} process(es), {} towers, gradients summed {}: {}", world.size(), trainer.world_towers(),
               trainer.devices().reduction(), list);
}

/// The precision the towers compute in, how many layers tower 0 stores in
/// bf16 (docs/gpu.md, docs/cpu.md), and whether steps replay CUDA graphs; for
/// CPU towers only when they compute in bf16 (TowerDevices warns when a CPU cannot).
void log_precision(const Trainer& trainer) {
  const Device& d = trainer.devices().device(0);
  if (!d.is_cuda() && d.precision != Precision::BF16) return;
  int bf16 = 0;
  for (int i = 0; i < trainer.model().num_layers(); ++i) bf16 += trainer.model().activation_type(i) == DType::BF16;
  spdlog::info("{} towers: convolutions in {}, {} of {} layers' activations in bf16, gradients summed {}{}",
               d.is_cuda() ? "GPU" : "CPU", precision_name(d.precision), bf16, trainer.model().num_layers(),
               trainer.devices().reduction(),
               trainer.cuda_graphs() ? "; steps replayed from CUDA graphs (training.cuda_graphs)" : "");
}

/// One training command, step by step (run_train calls them in order).
class TrainRun {
 public:
  /// Reads the config (applying f's overrides) and joins the run's processes.
  explicit TrainRun(const TrainFlags& f);
  /// Towers, model, output folder, data folders and config checks, before any work.
  void check_setup();
  /// The trainer, with its towers; logs the world and the precision.
  void build_trainer();
  /// The starting weights: the resumed checkpoint's, or initial weights.
  /// Returns the exit code when a resumed run has nothing left to train.
  std::optional<int> start_weights();
  /// The model table, then the data (load_training_data).
  void load_data();
  /// The exit code when a signal stopped the run while its data loaded.
  std::optional<int> stopped_while_loading();
  /// Locks the output folder, trains (fit) and reports. Returns the exit code.
  int train();

 private:
  /// start_weights for --resume.
  std::optional<int> resume();
  /// What ends a run: the JSON line, or the files written; the exit code.
  int report(const FitResult& result) const;

  const TrainFlags& f_;
  Config config_;
  std::unique_ptr<ProcessGroup> world_;
  bool voice_ = true, json_ = false;
  Towers towers_;
  std::optional<Model> model_;
  std::optional<OutputFolder> output_;
  TrainData data_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<Checkpoint> resume_;
  std::string resume_run_folder_;
  const std::atomic<int>* stop_ = nullptr;
};

TrainRun::TrainRun(const TrainFlags& f) : f_(f) {
  // A JSON consumer gets a final object when the run fails too (rank 0's, with the error main prints).
  set_json_errors(f.log_format == "json" && detect_launch().rank == 0);
  // One of several processes: its errors name it and its host from the start (an error in joining them);
  // the world, once joined, names the host as MPI does.
  name_launched_process();
  // Under mpirun or srun, the run's processes (nullptr alone); rank 0 alone prints and writes.
  ConfigInWorld in = load_config_in_world(f.config, "trainer", [&](Config& config) {
    require_known_layer_types(config.model, config.path);  // as the config's own errors, before the flags'
    apply_overrides(config, f);
    if (!f.resume.empty() && !f.initial_weights.empty())
      throw UserError("--initial-weights starts a new run from a checkpoint's weights, --resume continues the run "
                      "that a checkpoint holds (with its weights): pass one of them");
  });
  config_ = std::move(in.config);
  world_ = std::move(in.world);
  voice_ = !world_ || world_->rank() == 0;
  json_ = f.log_format == "json";
  if (world_ && world_->size() > 1) set_error_origin(process_name(world_->rank(), world_->host()) + ": ");
  if (!voice_) quiet_follower(*world_);
  // Processes that trained with other settings would part ways, or wait for each other forever.
  if (world_) require_same_settings(*world_, config_, !f.resume.empty());
  output_.emplace(config_.training, f.overwrite, f.resume);
}

void TrainRun::check_setup() {
  ProcessGroup* world = world_.get();
  const std::vector<GpuInfo> gpus = list_gpus();  // a bad --gpus fails early (each process has its own GPUs)
  const HostProcesses host = host_processes(world, gpus);  // a collective: outside check_together
  check_together(world, [&] { towers_ = resolve_towers(f_.gpus, f_.threads, f_.gpus_given, gpus, host); });
  check_together(world, [&] { model_.emplace(config_.model, config_.path); });  // layers and shapes
  // Another run's files are refused before any output, as the command line's other errors (a resumed run's
  // once its checkpoint has been read). Rank 0 alone writes there (the others may see another file system).
  check_together(world, [&] {
    if (voice_) output_->check_before_start();
  });
  data_ = data_options(config_, *model_, !f_.images.empty() || !f_.masks.empty());
  // Folders whose pairs do not match fail before the summary, so the error is not lost below it (names
  // only: nothing is decoded; with skip_bad_files the loading warns, once). A host's folder may be missing.
  if (!data_.train.skip_bad_files) check_together(world, [&] { check_pairs_match(data_); });
  check_together(world, [&] {
    validate_for_training(config_, *model_);
    check_callback_files(config_);
    require_trainable_weights(config_, *model_);
  });
}

void TrainRun::build_trainer() {
  // Towers and a resumed checkpoint are checked before any image is decoded, so a mismatch fails fast.
  trainer_ = std::make_unique<Trainer>(config_, towers_.plan, towers_.threads_per_tower, world_.get());
  if (world_) log_world(*world_, towers_.plan, *trainer_);
  log_precision(*trainer_);
}

std::optional<int> TrainRun::start_weights() {
  const TrainingConfig& tc = config_.training;
  if (!f_.resume.empty()) return resume();
  if (!tc.initial_weights.empty()) {
    check_together(world_.get(), [&] { load_initial_weights(tc, *trainer_); });
    if (world_) require_same_file(*world_, tc.initial_weights, tc.initial_weights_where);
  } else if (trainer_->model().num_frozen() > 0) {  // Keras says nothing; frozen layers want pretrained weights
    spdlog::warn("layers {} are frozen (trainable: false) and start from their initializers' random values, which "
                 "they keep for the whole run: give the pretrained weights with --initial-weights (or "
                 "training.initial_weights), or leave trainable out",
                 fmt::join(trainer_->model().frozen_layers(), ", "));
  }
  return std::nullopt;
}

std::optional<int> TrainRun::resume() {
  // Each process reads the file: checked together, so that one whose read fails does not leave the others
  // waiting, and one whose copy differs (a host's stale copy) does not train other weights.
  std::optional<FitResult> done;  // set when nothing is left to train
  check_together(world_.get(), [&] {
    const std::string identity = file_identity(f_.resume);  // before the read: a later change is seen
    resume_ = std::make_unique<Checkpoint>(load_checkpoint(f_.resume));
    if (const std::string bad = first_non_finite(*resume_, true); !bad.empty())  // the weights are checked on load
      throw UserError(f_.resume + ": " + bad + "; the training that wrote it diverged or the file is damaged: "
                      "resume from an earlier checkpoint (predict, evaluate and export can still use its weights)");
    done = load_resume(*resume_, f_.resume, config_, *trainer_, resume_run_folder_);
    output_->set_resume(*resume_, resume_run_folder_, identity);
  });
  if (world_) require_same_file(*world_, f_.resume, "--resume");
  if (done) {
    // A run that ended before its final.h5 was written gets it now, in its folder, which rank 0 decides and locks.
    double finish = 0;
    check_together(world_.get(), [&] { finish = voice_ && output_->lock_to_finish(); });
    if (world_ && world_->size() > 1) world_->all_reduce_max(&finish, 1);
    if (finish > 0) done->files.push_back(finish_ended_run(config_, *trainer_, *resume_, f_.resume, world_.get()));
    if (json_ && voice_) print_json_result(*done);
    return 0;
  }
  // Nor may a resumed run overwrite another run's files, or (resumed in place from an earlier checkpoint) the
  // later epochs of its own.
  check_together(world_.get(), [&] {
    if (voice_) output_->check();
  });
  if (voice_) output_->announce_branch(!f_.output.empty());
  if (!config_.training.initial_weights.empty())
    spdlog::info("training.initial_weights ({}) is not read: the resumed checkpoint holds the weights",
                 config_.training.initial_weights);
  return std::nullopt;
}

void TrainRun::load_data() {
  set_image_pixel_limit(size_t(config_.data.max_image_pixels), "data.max_image_pixels");
  // The model table once the config and checkpoint checks have passed, so that their errors do not follow it
  // (a bad image found while decoding still does). stdout holds only JSON lines with --log-format json.
  if (voice_) (json_ ? std::cerr : std::cout) << model_->summary() << std::flush;
  stop_ = &install_stop_handlers();
  check_together(world_.get(), [&] { require_memory_for_data(data_, *trainer_, !world_ || world_->size() == 1); });
  load_training_data(data_, trainer_->classes(), world_.get());
}

std::optional<int> TrainRun::stopped_while_loading() {
  double signal = stop_->load();  // every process stops here if any was asked to while the data loaded
  if (world_ && world_->size() > 1) world_->all_reduce_max(&signal, 1);
  if (signal == 0) return std::nullopt;
  spdlog::warn("stopped by signal {} before training started; nothing was written", int(signal));
  FitResult none;  // nothing to save yet
  none.epochs_run = resume_ ? resume_->epoch : 0;
  none.stop_signal = int(signal);
  if (json_ && voice_) print_json_result(none);
  return 128 + int(signal);
}

int TrainRun::train() {
  FitOptions options;
  // mpirun hands its processes a terminal and merges their output: plain lines there.
  options.progress_bar = isatty(fileno(stdout)) && !world_;
  options.json = json_;
  options.stop = stop_;
  options.continue_command = command_without_resume(f_.command_line);
  options.resume = resume_.get();
  options.resume_path = f_.resume;
  options.resume_run_folder = resume_run_folder_;
  if (data_.has_validation) options.validation = &data_.validation;
  options.stream = data_.stream.stream.get();
  options.validation_stream = data_.validation_stream.stream.get();
  options.world = world_.get();
  // One run at a time in a folder: a second one, resumed from the first's last.h5 while it runs, would
  // overwrite its checkpoints.
  check_together(world_.get(), [&] {
    if (voice_) output_->lock_for_training();
  });
  if (voice_) {
    const std::string last = (std::filesystem::path(config_.training.output_dir) / "last.h5").string();
    announce_stops(last, continue_with(options, last));
  }
  return report(fit(config_, *trainer_, data_.data, options));
}

int TrainRun::report(const FitResult& result) const {
  const int code = result.stop_signal ? 128 + result.stop_signal : 0;
  if (!voice_) return code;
  const char* how = result.stop_signal ? " (stopped by a signal)" : result.stopped_early ? " (early stopping)" : "";
  if (json_) {
    print_json_result(result);
  } else {
    std::printf("Done: %d epoch(s)%s. Files:\n", result.epochs_run, how);
    for (const auto& file : result.files) std::printf("  %s\n", file.c_str());
  }
  return code;
}

}  // namespace

int run_train(const TrainFlags& f) {
  TrainRun run(f);
  run.check_setup();
  run.build_trainer();
  if (const std::optional<int> done = run.start_weights()) return *done;
  run.load_data();
  if (const std::optional<int> stopped = run.stopped_while_loading()) return *stopped;
  return run.train();
}

}  // namespace trainer::cli
