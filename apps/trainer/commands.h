#pragma once
// The trainer's commands. Each registers its flags with CLI11 and returns the
// function that runs it once the command line is parsed; main() dispatches.
// A command returns the process exit code and throws UserError for user
// mistakes (main prints them as one "error: ..." line and exits with 2).
#include <CLI/CLI.hpp>
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/config.h"
#include "data/tiling.h"
#include "dist/device_plan.h"
#include "train/load_model.h"
#include "train/trainer.h"

namespace trainer::cli {

using Runner = std::function<int()>;

/// A sub-command: the CLI11 app it added (set when it was given) and its runner.
struct Command {
  CLI::App* app;
  Runner run;
};

/// Training, on the top-level flags: trainer --config FILE --gpus SPEC ...
/// args: the command line as given (argv), from which a stopped run's
/// continuation is printed (command_without_resume).
Runner add_train(CLI::App& app, const std::vector<std::string>& args);
/// trainer summary --config FILE
Command add_summary(CLI::App& app);
/// trainer export --checkpoint CKPT --output FILE.onnx
Command add_export(CLI::App& app);
/// trainer import MODEL --output CONFIG.yaml
Command add_import(CLI::App& app);
/// trainer predict --checkpoint CKPT --input FILE_OR_DIR --output DIR
Command add_predict(CLI::App& app);
/// trainer evaluate --checkpoint CKPT --images DIR (--masks DIR | --labels DIR | --native DIR)
Command add_evaluate(CLI::App& app);

/// CLI11 check of a file or folder flag: an empty value (`--resume "$CK"` with
/// CK unset) is a usage error naming the flag (exit 2), not "flag not given",
/// which for --resume or --output would start over a run's files.
const CLI::Validator& non_empty_path();

/// The message for arguments CLI11 did not expect (its ExtrasError), in the
/// order given: "unexpected argument(s) for 'trainer': --epoch 1 (did you
/// mean '--epochs'?)", with a suggestion for each unknown --flag among the
/// flags of the command they were given to (the subcommand chosen in
/// `failed`, else `failed` itself); CLI11 lists them reversed, without one.
std::string unexpected_arguments(const CLI::App& failed);
/// " (a config is given with --config: --config <arg>)" when the command
/// takes --config, was not given it, and an argument left over by the parse
/// of failed (or of its command) names a .yaml or .yml file, as
/// `trainer summary unet.yaml` does; else "".
std::string config_without_flag(const CLI::App& failed);

/// "" unless a command (predict, ...) was chosen in app and flags were given
/// before it: the training run's (`trainer --gpus 1 predict ...`, which
/// predict would not see) or the command's own left over there (`trainer
/// --checkpoint X predict`). Else the message naming them and saying to put
/// them after the command (when it takes them) or that it takes none of them.
std::string misplaced_flags(const CLI::App& app);

/// "" unless an argument of argv is a long flag of app or of one of its
/// commands written with one dash (-config x.yaml, which CLI11 reads as
/// `-c onfig`, leaving x.yaml unexpected); else the message naming it and the
/// fix ("'-config' has one dash (...): write --config").
std::string single_dash_long_flag(const CLI::App& app, int argc, const char* const* argv);

/// The towers of a --gpus spec, and the CPU threads each gets (from --threads,
/// default every core, divided among the towers).
struct Towers {
  DevicePlan plan;
  int threads_per_tower = 1;
};
/// The cores this process uses when --threads is not given: the host's cores
/// over its local_size processes, and at most those of its CPU affinity mask
/// (a launcher's binding: mpirun binds each of 2 processes or fewer to a
/// core by default); at least 1.
int process_cores(int local_size);
/// Resolves spec (UserError for a bad one) and logs warnings and the choice.
/// gpus_given: --gpus was on the command line; without it the default `all`
/// falling back to the CPU on a machine without GPUs is logged as info, not
/// as a warning (it is what the user asked for by giving nothing).
/// found: the visible GPUs (list_gpus()). host: this process among its
/// host's (host_processes; the default: a process alone): `local` and `all`
/// take this process's share of its host's GPUs, and the default threads are
/// process_cores.
Towers resolve_towers(const std::string& gpus, std::optional<int> threads, bool gpus_given,
                      const std::vector<GpuInfo>& found, const HostProcesses& host = {});
/// UserError for a command that runs in one process (predict, evaluate,
/// export) started by an MPI launcher as several: each would do the whole
/// work and write the same files.
void require_one_process(const std::string& command);
/// When an MPI launcher started several processes, this one's rank and host,
/// "rank 1 (host node2): " (from the launcher's environment and gethostname,
/// before MPI is joined); else "".
std::string launched_process_name();
/// Makes this process's error lines start with launched_process_name().
void name_launched_process();

/// Seconds a process that found an error before joining the others waits for
/// them (join_run) before it prints the error itself and exits.
inline constexpr int kJoinWaitSeconds = 30;

/// What every command that runs under an MPI launcher joins with: the run's
/// processes (join_world(timeout_s); nullptr alone), once their builds are
/// compared (require_same_build) and `found`, an error this process found
/// before joining (a command-line or config error; null: none), is reported
/// together with the others' (check_together: rank 0 prints the errors once
/// for the run), which throws then. A process that found one waits for the
/// others to join at most kJoinWaitSeconds, then prints it itself and exits
/// with 2: one that ended without joining (--version on one rank of an MPMD
/// launch) would hold it in MPI_Init, which no timeout bounds. A process
/// without one waits timeout_s (training.collective_timeout) for the others
/// to join, then prints that they did not and exits with 1. When joining
/// fails (srun without --mpi=pmix, a build without MPI, an MPI error that
/// returns), `found` is thrown instead.
/// command: this process's, compared by require_same_build ("" when unknown).
std::unique_ptr<ProcessGroup> join_run(double timeout_s, const std::exception_ptr& found, const std::string& command);

/// The config every process of a run reads (its own copy), with `adjust` (the
/// flags) applied, and the run's processes (join_run; nullptr alone),
/// joined once the config is read: its training.collective_timeout bounds
/// their collectives (600 s when it cannot be read). Under an MPI launcher an
/// error in reading or adjusting the config (a UserError: YAML, keys, values)
/// is printed once for the run by rank 0, naming the processes when only some
/// of them found it (check_together). Throws UserError (ReportedUserError
/// under a launcher) on such an error, and join_run's errors.
struct ConfigInWorld {
  Config config;
  std::unique_ptr<ProcessGroup> world;
};
/// command: the command run ("trainer", "trainer summary"), which every process must run alike.
ConfigInWorld load_config_in_world(const std::string& path, const std::string& command,
                                   const std::function<void(Config&)>& adjust = {});

/// Prints the command-line error `message` ("error: <message>") and returns
/// exit code 2. Under an MPI launcher of several processes the processes join
/// first (join_run; the others are then in load_config_in_world's), and rank
/// 0 prints it once for the run, or each process's own after its rank and
/// host when only some of them have it.
int report_usage_error(const std::string& message);

/// Installs SIGINT/SIGTERM/SIGHUP handlers (SIGHUP only when not ignored, as
/// under nohup): the returned flag becomes the signal's number at the first
/// one (training stops after the current step); a second SIGINT exits the
/// process at once with code 130.
const std::atomic<int>& install_stop_handlers();
/// From now on the first stop signal is acknowledged at once on stderr
/// ("stopping: finishing this step, then writing last.h5 ..."): called when
/// the training loop starts, by the process that speaks (world rank 0).
/// Before, a stop ends the run before training with its own message. A
/// second SIGINT then prints continue_hint (train/fit.h's continue_with) when
/// the run's last checkpoint `last` exists at that moment.
void announce_stops(const std::string& last, const std::string& continue_hint);
/// For commands that write files and have nothing to finish (export, predict):
/// SIGINT/SIGTERM/SIGHUP delete the temporary file being written, if any, and
/// exit with 128 + signal at once.
void install_exit_handlers();
/// SIGXFSZ ignored, for every command: a write past the file-size limit
/// (ulimit -f) then fails with EFBIG, which the writers report as an error
/// naming the file and leave no partial file, instead of the process dying.
void ignore_file_size_signal();

/// trainer::load_model (train/load_model.h) on the towers of --gpus.
/// UserError naming path for a missing, corrupt or foreign checkpoint.
LoadedModel load_model(const std::string& checkpoint_path, const Towers& towers);

/// Sets the image pixel limit (data/image_header.h) of predict and evaluate:
/// --max-image-pixels when given (0: none), else the checkpoint's
/// data.max_image_pixels.
void apply_image_pixel_limit(const std::optional<long long>& flag, const LoadedModel& m);

/// UserError when --threshold was given (`given`) for m, a model of K classes
/// (Trainer::classes() > 0), whose pixels take their most probable class.
void refuse_threshold_for_classes(bool given, const LoadedModel& m, const std::string& checkpoint_path);

/// The help of predict's and evaluate's --split-depth.
inline constexpr const char* kSplitDepthHelp =
    "A one-channel model's touching nuclei: split where the distance to the background dips by at least this "
    "many pixels between two centres (h-maxima watershed); 0 keeps each connected component whole";

/// UserError when --split-depth was given (`given`) where it splits nothing:
/// without --instances (`instances` false: predict) or for a model of
/// `classes` classes (a boundary model's nuclei come from its classes).
void refuse_split_depth(bool given, bool instances, int classes);

/// predict's and evaluate's --tiles, --tile-overlap and --tile-blend.
struct TileFlags {
  bool tiles = false;
  std::optional<double> overlap;
  std::optional<std::string> blend;
  /// The tiles to predict in: a checkpoint trained on crops (crop: its
  /// config's data.crop) predicts in its tiles (overlap, blend, scale), and
  /// --tiles asks for tiles of any model (default overlap 0.5, gaussian,
  /// scale 1); --tile-overlap and --tile-blend replace those settings.
  /// nullopt (resize to the input) for a model trained on resized images
  /// without --tiles. UserError for --tile-overlap or --tile-blend then
  /// (naming checkpoint), or a blend CLI11 let through.
  std::optional<TileOptions> options(const std::optional<CropConfig>& crop, const std::string& checkpoint) const;
};
/// Adds the tile flags to cmd, filling f.
void add_tile_flags(CLI::App* cmd, TileFlags& f);

}  // namespace trainer::cli
