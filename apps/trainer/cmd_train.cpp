// Training (the default command): trainer --config FILE --gpus SPEC [overrides].
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "core/exit_codes.h"
#include "core/error.h"
#include "core/json_text.h"
#include "core/shell_word.h"
#include "data/dataset.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/folder_lock.h"
#include "train/resume_check.h"
#include "train/tensorboard.h"
#include "nn/model.h"
#include "train/callbacks/registry.h"
#include "train/fit.h"
#include "train/initial_weights.h"
#include "world_checks.h"
#include "world_data.h"

namespace trainer::cli {

namespace {

struct TrainFlags {
  bool gpus_given = false;  ///< --gpus on the command line
  std::string config, gpus = "all", output, images, masks, resume, initial_weights, log_format = "text", precision;
  bool overwrite = false;
  std::optional<int> epochs, batch_size, threads;
  std::optional<uint64_t> seed;
  std::vector<std::string> command_line;  ///< argv as given
};

// Applies the flags to config, and to its text too, so that checkpoints store
// the settings the run really used (the text is re-emitted without comments).
void apply_overrides(Config& config, const TrainFlags& f) {
  YAML::Node root = YAML::Load(config.text);
  bool changed = false;
  // Removed first: assigning to a node written as an alias (*n) would change its anchor's other uses too.
  auto set = [&](const char* section, const char* key, const auto& value) {
    root[section].remove(key);
    root[section][key] = value;
    changed = true;
  };
  if (f.epochs) set("training", "epochs", config.training.epochs = *f.epochs);
  if (f.batch_size && config.training.batch_size_per_device)
    throw UserError("--batch-size sets the global batch, but " + config.path +
                    " gives training.batch_size_per_device (each tower's batch): change that key, or remove it (and "
                    "learning_rate_scaling) to give the global batch");
  if (f.batch_size) set("training", "batch_size", config.training.batch_size = *f.batch_size);
  if (f.seed) set("training", "seed", config.training.seed = *f.seed);
  if (!f.output.empty()) set("training", "output_dir", config.training.output_dir = f.output);
  if (!f.images.empty()) set("data", "images", config.data.images = f.images);
  if (!f.masks.empty()) set("data", "masks", config.data.masks = f.masks);
  if (!f.initial_weights.empty()) {  // the file only: a config's skip_mismatch stays
    if (root["training"]["initial_weights"].IsMap()) {
      YAML::Node w = YAML::Clone(root["training"]["initial_weights"]);  // not through an alias either
      w["filepath"] = config.training.initial_weights = f.initial_weights;
      root["training"].remove("initial_weights");
      root["training"]["initial_weights"] = w;
      changed = true;
    } else {
      set("training", "initial_weights", config.training.initial_weights = f.initial_weights);
    }
    config.training.initial_weights_where = "--initial-weights";
  }
  if (!f.precision.empty()) {
    set("training", "precision", f.precision);
    config.training.precision = f.precision == "bf16"   ? Precision::BF16
                                : f.precision == "tf32" ? Precision::TF32
                                                        : Precision::FP32;
  }
  if (changed) config.text = "# " + config.path + " with command-line overrides\n" + YAML::Dump(root) + "\n";
}

// Whether EarlyStopping ended the checkpoint's run at its epoch (the
// checkpoint says so: training_state/early_stopped) and config's
// EarlyStopping would end it again at once: its wait counter (watched epochs
// without improvement) has reached config's patience. Raising the patience,
// or removing EarlyStopping, trains on.
bool early_stopping_ended(const Checkpoint& ckpt, const Config& config) {
  const auto flag = ckpt.state_scalars.find("early_stopped"), wait = ckpt.state_scalars.find("early_stopping_wait");
  return flag != ckpt.state_scalars.end() && flag->second == 1 && wait != ckpt.state_scalars.end() &&
         config.training.early_stopping.enabled && wait->second >= config.training.early_stopping.patience;
}

// Gives trainer the checkpoint's weights and optimizer state, after reporting
// how the config differs from the one the checkpoint's run used, and sets
// run_folder to the checkpoint's run folder (run_folder_of, from the
// ModelCheckpoint filepath of the run that wrote it). Returns the run's result
// (after a warning) when it has nothing left to train: the checkpoint has
// trained config's epochs, or EarlyStopping ended its run and would again.
std::optional<FitResult> load_resume(const Checkpoint& ckpt, const std::string& path, const Config& config,
                                     Trainer& trainer, std::string& run_folder) {
  Config then = parse_config(ckpt.config_yaml, path + " (its stored config)");
  // Until 2026-12-05 a config without training.optimizer trained with SGD(0.01), which keeps no slots; now it
  // means Keras's RMSprop(0.001). Such a checkpoint is read as what trained it.
  bool slots = false;
  for (const auto& kv : ckpt.state_arrays) slots |= kv.first.rfind("optimizer_", 0) == 0;
  if (const YAML::Node stored = YAML::Load(ckpt.config_yaml)["training"];
      stored.IsMap() && !stored["optimizer"] && !slots && ckpt.state_scalars.count("optimizer_iterations")) {
    then.training.optimizer = OptimizerConfig{};
    then.training.optimizer.type = "SGD";
    then.training.optimizer.learning_rate = 0.01;
    spdlog::info("{}: its run's config names no optimizer and it holds no optimizer slots: it trained with SGD "
                 "(learning rate 0.01), the default before 2026-12-05 (RMSprop now)", path);
  }
  run_folder = run_folder_of(path, then.training.model_checkpoint.filepath);
  trainer.load_weights(ckpt.weights, path);  // another model fails here, before any talk of settings
  if (!ckpt.state_scalars.count("optimizer_iterations")) {
    std::error_code ec;
    const std::filesystem::path last = std::filesystem::path(run_folder) / "last.h5";
    throw UserError(path + " holds no optimizer state (a weights-only file: final.h5, or a ModelCheckpoint file "
                           "with save_weights_only: true): continue its run with --resume " +
                    (std::filesystem::exists(last, ec) ? last.string() : std::string("its last.h5")) +
                    " (with a higher --epochs once it has finished), or, instead of --resume, start a new run from "
                    "its weights with --initial-weights " + path + " and another --output");
  }
  std::vector<std::string> differences = check_resume_trainable(then, trainer.model(), path);
  for (std::string& d : resume_differences(config, then, path)) differences.push_back(std::move(d));
  // Precision changes only GPU arithmetic (CPU towers compute in fp32 whatever it says).
  if (trainer.devices().any_gpu() && config.training.precision != then.training.precision)
    differences.push_back(std::string("training.precision is ") + precision_name(config.training.precision) +
                          " (the checkpoint's run used " + precision_name(then.training.precision) + ")");
  for (const auto& d : differences)
    spdlog::warn("resuming with other settings: {}; the run continues but is no longer the one that was stopped", d);
  trainer.load_optimizer(ckpt, path);
  FitResult done;
  done.epochs_run = ckpt.epoch;
  done.last_logs = ckpt.logs;
  auto next = ckpt.state_scalars.find("next_epoch");
  // An out-of-range or NaN value is left to fit's checks, which name it (int() of it would be undefined).
  if (next != ckpt.state_scalars.end() && next->second >= 1 && next->second <= double(1 << 30) &&
      int(next->second) > config.training.epochs) {
    spdlog::warn("{} has already trained {} epoch(s), at least training.epochs ({}); nothing to do: raise "
                 "--epochs to train further",
                 path, int(next->second) - 1, config.training.epochs);
    return done;
  }
  // A run that EarlyStopping ended has nothing left to train (another epoch would be stopped again).
  if (early_stopping_ended(ckpt, config)) {
    const EarlyStoppingConfig& es = config.training.early_stopping;
    const int wait = int(std::min(ckpt.state_scalars.at("early_stopping_wait"), 1e9));
    spdlog::warn("EarlyStopping ended the run of {} at epoch {} ({} did not improve for {} epoch{}; patience {}); "
                 "nothing to do: raise the EarlyStopping patience above {} to train further",
                 path, ckpt.epoch, es.monitor, wait, wait == 1 ? "" : "s", es.patience, wait);
    done.stopped_early = true;
    return done;
  }
  return std::nullopt;
}

/// Warns for each class with no pixel in the training masks: its channel only
/// learns "not this class". With ignore_class, binary 0/255 masks lose all
/// their foreground that way, which the metrics then do not show. counts:
/// each class's pixels over the training masks; masks: how many there are.
void warn_missing_classes(const std::vector<size_t>& counts, int masks, const DataOptions& opt) {
  if (opt.classes == 0) return;
  std::vector<int> missing;
  for (int c = 0; c < opt.classes; ++c)
    if (counts[size_t(c)] == 0) missing.push_back(c);
  if (missing.empty()) return;
  std::string list;
  for (int c : missing) list += (list.empty() ? "" : ", ") + std::to_string(c);
  const bool only_background = int(missing.size()) == opt.classes - 1 && counts[0] > 0;
  spdlog::warn("class{} {} of {} occur{} in none of the {} training masks in '{}': the model never learns {}{}",
               missing.size() > 1 ? "es" : "", list, opt.classes, missing.size() > 1 ? "" : "s", masks,
               opt.masks_dir, missing.size() > 1 ? "them" : "it",
               only_background && opt.ignore_class >= 0
                   ? "; only class 0 is left besides the ignored value " + std::to_string(opt.ignore_class) +
                         ": binary 0/" + std::to_string(opt.ignore_class) + " masks? Train them with loss: "
                         "binary_crossentropy, or give the foreground its class index"
                   : "");
}

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

/// The device, inode, size and modification time of path, as text ("" when it cannot be read): a file written
/// again (a checkpoint is renamed over the old one) has another.
std::string file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

/// Without --overwrite, UserError when the output folder holds another run's files that this run would write
/// over (check_output_holds_no_run), or, resumed in place (resume: the checkpoint read from f.resume, of the
/// run in resume_run_folder; nullptr for a new run), later epochs of its own run (check_resume_keeps_later_epochs).
void check_output_folder(const TrainFlags& f, const Config& config, const Checkpoint* resume,
                         const std::string& resume_run_folder) {
  if (f.overwrite) return;
  const std::string& out = config.training.output_dir;
  if (!resume)
    check_output_holds_no_run(out, "", config.training);
  else if (!resumes_in_place(resume_run_folder, out))
    check_output_holds_no_run(out, f.resume, config.training, resume_run_folder);
  else
    check_resume_keeps_later_epochs(out, f.resume, resume->epoch);
}

int run_train(const TrainFlags& f) {
  // A JSON consumer gets a final object when the run fails too (rank 0's, with the error main prints).
  set_json_errors(f.log_format == "json" && detect_launch().rank == 0);
  // One of several processes: its errors name it and its host from the start (an error in joining them);
  // the world, once joined, names the host as MPI does.
  name_launched_process();
  // Under mpirun or srun, the run's processes (nullptr alone); rank 0 alone prints and writes.
  ConfigInWorld in = load_config_in_world(f.config, "trainer", [&](Config& config) {
    apply_overrides(config, f);
    if (!f.resume.empty() && !f.initial_weights.empty())
      throw UserError("--initial-weights starts a new run from a checkpoint's weights, --resume continues the run "
                      "that a checkpoint holds (with its weights): pass one of them");
  });
  Config& config = in.config;
  const std::unique_ptr<ProcessGroup> world = std::move(in.world);
  const bool voice = !world || world->rank() == 0;
  if (world && world->size() > 1)
    set_error_origin(process_name(world->rank(), world->host()) + ": ");
  if (!voice) quiet_follower(*world);
  // Processes that trained with other settings would part ways, or wait for each other forever.
  if (world) require_same_settings(*world, config, !f.resume.empty());
  Towers towers;  // a bad --gpus fails early (each process has its own, and its own GPUs)
  const std::vector<GpuInfo> gpus = list_gpus();
  const HostProcesses host = host_processes(world.get(), gpus);  // a collective: outside check_together
  check_together(world.get(), [&] { towers = resolve_towers(f.gpus, f.threads, f.gpus_given, gpus, host); });
  std::optional<Model> built;  // validates layers and shapes before any work
  check_together(world.get(), [&] { built.emplace(config.model, config.path); });
  Model& model = *built;
  // A new run must not overwrite another run's files: refused before any output, as the command line's
  // other errors. A resumed run is checked once its checkpoint has been read (below). Rank 0 alone writes
  // there (the others may see another file system); they stop with it.
  check_together(world.get(), [&] {
    if (!voice) return;
    // A read-only folder would otherwise fail at the first epoch's log.csv, after hours on a big model.
    check_writable_folder(config.training.output_dir, "the output folder",
                          "make it writable, or set training.output_dir or --output to a writable folder");
    if (f.resume.empty()) check_output_folder(f, config, nullptr, "");
    if (f.overwrite)  // an earlier run's event files that this run does not replace
      if (const std::vector<std::string> stale = other_event_folders(config.training.output_dir, config.training);
          !stale.empty())
        spdlog::warn("--overwrite keeps the TensorBoard event files in {}{}, which tensorboard --logdir {} shows "
                     "beside this run; remove them if they are an earlier run's", stale.front(),
                     stale.size() > 1 ? " and " + std::to_string(stale.size() - 1) + " more folder(s)" : "",
                     config.training.output_dir);
  });
  DataOptions opt;
  opt.images_dir = config.data.images;
  opt.masks_dir = config.data.masks;
  opt.mask_suffix = config.data.mask_suffix;
  opt.height = model.input_shape().h;
  opt.width = model.input_shape().w;
  opt.channels = model.input_shape().c;
  opt.ignore_class = config.training.loss.ignore_class;
  opt.skip_bad_files = config.data.skip_bad_files;
  opt.threads = config.data.loader_threads;
  // Messages name where the folders came from: the config, or the flags.
  opt.config_path = f.images.empty() && f.masks.empty() ? config.path : "--images/--masks";
  DataOptions vopt = opt;  // data.validation_images / validation_masks, when given
  vopt.images_dir = config.data.validation_images;
  vopt.masks_dir = config.data.validation_masks;
  vopt.config_path = config.path;
  vopt.key_prefix = "validation_";
  const bool validation_folders = !config.data.validation_images.empty();
  // Folders whose pairs do not match fail before the summary, so the error is not lost below it (names
  // only: nothing is decoded; with skip_bad_files the loading below warns, once).
  if (!opt.skip_bad_files) {
    check_together(world.get(), [&] {  // a host's folder may be missing
      find_image_pairs(opt);
      if (validation_folders) find_image_pairs(vopt);
    });
  }
  const bool json = f.log_format == "json";
  check_together(world.get(), [&] {
    validate_for_training(config, model);
    check_callback_files(config);
    require_trainable_weights(config, model);
  });
  // Towers and a resumed checkpoint are checked before any image is decoded, so a mismatch fails fast.
  Trainer trainer(config, towers.plan, towers.threads_per_tower, world.get());
  if (world) log_world(*world, towers.plan, trainer);
  if (trainer.devices().any_gpu()) {
    int bf16 = 0;  // layers whose activations tower 0 stores in bf16 (docs/gpu.md)
    for (int i = 0; i < trainer.model().num_layers(); ++i) bf16 += trainer.model().activation_type(i) == DType::BF16;
    spdlog::info("GPU towers: convolutions in {}, {} of {} layers' activations in bf16, gradients summed {}",
                 precision_name(config.training.precision), bf16, trainer.model().num_layers(),
                 trainer.devices().reduction());
  } else if (config.training.precision == Precision::BF16)
    // tf32 (the default) asks for no more than fp32 gives; bf16 asks for savings a CPU tower does not make.
    spdlog::warn("training.precision bf16 applies to GPU towers; the CPU towers compute in fp32");
  std::unique_ptr<Checkpoint> resume;
  std::string resume_run_folder;
  std::string resume_file;  ///< file_identity of --resume when it was read
  if (!f.resume.empty()) {
    // Each process reads the file: checked together, so that one whose read fails does not leave the others
    // waiting, and one whose copy differs (a host's stale copy) does not train other weights.
    std::optional<FitResult> done;  // set when nothing is left to train
    check_together(world.get(), [&] {
      resume_file = file_identity(f.resume);  // before the read: a later change is seen below
      resume = std::make_unique<Checkpoint>(load_checkpoint(f.resume));
      if (const std::string bad = first_non_finite(*resume, true); !bad.empty())  // the weights are checked on load
        throw UserError(f.resume + ": " + bad + "; the training that wrote it diverged or the file is damaged: "
                        "resume from an earlier checkpoint (predict, evaluate and export can still use its weights)");
      done = load_resume(*resume, f.resume, config, trainer, resume_run_folder);
    });
    if (world) require_same_file(*world, f.resume, "--resume");
    if (done) {
      // A run that ended before its final.h5 was written gets it now, in its folder, which rank 0 decides and
      // locks: an earlier checkpoint, a mid-epoch one, or a run still training must not get one.
      std::optional<FolderLock> lock;
      double finish = 0;
      check_together(world.get(), [&] {
        if (!voice || !lacks_final(config.training.output_dir, f.resume, *resume)) return;
        lock.emplace(config.training.output_dir);
        finish = lacks_final(config.training.output_dir, f.resume, *resume);  // again, once locked
      });
      if (world && world->size() > 1) world->all_reduce_max(&finish, 1);
      if (finish > 0) done->files.push_back(finish_ended_run(config, trainer, *resume, f.resume, world.get()));
      if (json && voice) print_json_result(*done);
      return 0;
    }
    // A resumed run writing elsewhere must not overwrite another run's files either, nor one resumed in
    // place from an earlier checkpoint (a new user's report) the later epochs of its own run.
    check_together(world.get(), [&] {
      if (voice) check_output_folder(f, config, resume.get(), resume_run_folder);
    });
    // A run stopped with -o and resumed without it goes on in the config's output_dir: said.
    if (voice && !resumes_in_place(resume_run_folder, config.training.output_dir)) {
      const std::string branch = "resuming the run of '" + resume_run_folder + "' into '" +
                                 config.training.output_dir + "'" +
                                 (f.output.empty() ? " (the config's output_dir)" : "") +
                                 ": a branch of that run, whose own folder stays as it is";
      if (f.output.empty())
        spdlog::warn("{}; to continue it in its own folder, pass --output {}", branch, shell_word(resume_run_folder));
      else
        spdlog::info("{}", branch);
    }
    if (!config.training.initial_weights.empty())
      spdlog::info("training.initial_weights ({}) is not read: the resumed checkpoint holds the weights",
                   config.training.initial_weights);
  } else if (!config.training.initial_weights.empty()) {
    check_together(world.get(), [&] { load_initial_weights(config.training, trainer); });
    if (world) require_same_file(*world, config.training.initial_weights, config.training.initial_weights_where);
  } else if (trainer.model().num_frozen() > 0) {  // Keras says nothing here; frozen layers want pretrained weights
    spdlog::warn("layers {} are frozen (trainable: false) and start from their initializers' random values, which "
                 "they keep for the whole run: give the pretrained weights with --initial-weights (or "
                 "training.initial_weights), or leave trainable out",
                 fmt::join(trainer.model().frozen_layers(), ", "));
  }
  // The model table once the config and checkpoint checks have passed, so that their errors do not follow it
  // (a bad image found while decoding still does).
  if (voice) (json ? std::cerr : std::cout) << model.summary() << std::flush;  // stdout holds only JSON lines then
  const std::atomic<int>& stop = install_stop_handlers();

  opt.classes = vopt.classes = trainer.classes();
  if (validation_folders) {
    std::error_code ec;
    if (std::filesystem::equivalent(vopt.images_dir, opt.images_dir, ec))
      spdlog::warn("data.validation_images is the training images' folder '{}': the run validates on pairs it "
                   "trains on", opt.images_dir);
  }
  // One process holds every pair decoded; several decode per step only their towers' samples, and data
  // (validation) then holds the names alone.
  Dataset data, validation;
  WorldPairs stream, validation_stream;
  if (world && world->size() > 1) {
    if (opt.threads == 0)  // this process's cores (as its towers'): they decode while the towers train
      opt.threads = vopt.threads = process_cores(world->local_size());
    stream = open_world_pairs(*world, opt);
    data.names = stream.stream->names();
    warn_missing_classes(stream.class_pixels, data.size(), opt);
    if (validation_folders) {
      validation_stream = open_world_pairs(*world, vopt);
      validation.names = validation_stream.stream->names();
    }
  } else {
    data = load_dataset(opt);
    if (validation_folders) validation = load_dataset(vopt);
    if (opt.classes > 0) warn_missing_classes(class_pixel_counts(data.masks, opt.classes), data.size(), opt);
  }

  FitOptions fit_options;
  // mpirun hands its processes a terminal and merges their output: plain lines there.
  fit_options.progress_bar = isatty(fileno(stdout)) && !world;
  fit_options.json = json;
  fit_options.stop = &stop;
  fit_options.continue_command = command_without_resume(f.command_line);
  fit_options.resume = resume.get();
  fit_options.resume_path = f.resume;
  fit_options.resume_run_folder = resume_run_folder;
  if (validation_folders) fit_options.validation = &validation;
  fit_options.stream = stream.stream.get();
  fit_options.validation_stream = validation_stream.stream.get();
  fit_options.world = world.get();
  double signal = stop.load();  // every process stops here if any was asked to while the data loaded
  if (world && world->size() > 1) world->all_reduce_max(&signal, 1);
  if (signal > 0) {  // stopped while the data loaded: nothing to save yet
    spdlog::warn("stopped by signal {} before training started; nothing was written", int(signal));
    FitResult none;
    none.epochs_run = resume ? resume->epoch : 0;
    none.stop_signal = int(signal);
    if (json && voice) print_json_result(none);
    return 128 + int(signal);
  }
  // One run at a time in a folder: a second one, resumed from the first's last.h5 while it runs, would
  // overwrite its checkpoints. Checked again once locked: a run that started and ended there while this one
  // loaded its data must not be overwritten without --overwrite.
  std::optional<FolderLock> lock;
  check_together(world.get(), [&] {
    if (!voice) return;
    lock.emplace(config.training.output_dir);
    check_output_folder(f, config, resume.get(), resume_run_folder);
    // Two resumes of one last.h5 (a retried job): the first may continue the run while the second loads its
    // data, and the second would then train those epochs again from its stale copy.
    if (resume && resumes_in_place(resume_run_folder, config.training.output_dir) &&
        file_identity(f.resume) != resume_file)
      throw UserError(f.resume + " has changed since this run read it: another run continued from it meanwhile "
                      "(or wrote it again); resume again to continue from what it holds now");
  });
  if (voice) {
    const std::string last = (std::filesystem::path(config.training.output_dir) / "last.h5").string();
    announce_stops(last, continue_with(fit_options, last));
  }
  const FitResult result = fit(config, trainer, data, fit_options);
  if (!voice) return result.stop_signal ? 128 + result.stop_signal : 0;
  const char* how = result.stop_signal ? " (stopped by a signal)" : result.stopped_early ? " (early stopping)" : "";
  if (json) {
    print_json_result(result);
  } else {
    std::printf("Done: %d epoch(s)%s. Files:\n", result.epochs_run, how);
    for (const auto& file : result.files) std::printf("  %s\n", file.c_str());
  }
  return result.stop_signal ? 128 + result.stop_signal : 0;
}

}  // namespace

Runner add_train(CLI::App& app, const std::vector<std::string>& args) {
  auto f = std::make_shared<TrainFlags>();
  f->command_line = args;
  app.add_option("--config,-c", f->config, "Run configuration (YAML: model, data, training)")->check(non_empty_path());
  app.add_option("--gpus", f->gpus,
                 "Devices, one tower each: all (every GPU; CPU if none), GPU indices such as 0,2,5 or 2 "
                 "(indices, not a count; 0,0 puts two towers on GPU 0), cpu, cpu:N (N CPU towers, N <= 64), or "
                 "local (under mpirun or srun: the GPU of the process's rank on its host)")
      ->capture_default_str()
      ->each([f](const std::string&) { f->gpus_given = true; });
  app.add_option("--epochs", f->epochs, "Override training.epochs")->check(CLI::Range(1, 1000000));
  app.add_option("--batch-size", f->batch_size, "Override training.batch_size (global batch)")
      ->check(CLI::Range(1, 1000000));
  // CLI11 saturates 2^64 to 2^64 - 1 and takes -1 as 2^64 - 1; the config rejects both, so must the flag.
  app.add_option("--seed", f->seed, "Override training.seed (an integer in [0, 2^64 - 1])")
      ->check(CLI::Validator(
          [](std::string& v) {
            errno = 0;
            char* end = nullptr;
            const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
            (void)std::strtoull(v.c_str(), &end, 10);
            return digits && errno != ERANGE ? std::string()
                                             : "'" + v + "' is not an integer in [0, 18446744073709551615]";
          },
          "", "seed"));
  app.add_option("--output,-o", f->output, "Override training.output_dir")->check(non_empty_path());
  app.add_option("--images", f->images, "Override data.images (folder of images)")->check(non_empty_path());
  app.add_option("--masks", f->masks, "Override data.masks (folder of masks)")->check(non_empty_path());
  app.add_option("--precision", f->precision, "Override training.precision (GPU convolutions): fp32, tf32, bf16")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}));
  app.add_option("--threads", f->threads,
                 "CPU threads in all, divided among the towers, at least 1 each (default: every core)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--resume", f->resume,
                 "Continue the run saved in this checkpoint (last.h5, or a ModelCheckpoint file) with --config")
      ->check(non_empty_path());
  app.add_option("--initial-weights", f->initial_weights,
                 "Override training.initial_weights: start a new run from this checkpoint's weights (a model of "
                 "the same layers; Keras's load_weights before fit), with a fresh optimizer")
      ->check(non_empty_path());
  app.add_flag("--overwrite", f->overwrite,
               "Train into an output folder that holds another run (a new run there, or one resumed from "
               "elsewhere): its last.h5, final.h5 and fixed-name ModelCheckpoint file are removed and its log.csv "
               "emptied when the run starts; other checkpoints are replaced as this run writes its own");
  app.add_option("--log-format", f->log_format,
                 "text: Keras-style lines; json: one JSON object per epoch on stdout (the model summary goes "
                 "to stderr)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  return [f] { return run_train(*f); };
}

}  // namespace trainer::cli
