// Helpers shared by the trainer's commands: towers from --gpus, models from checkpoints.
#include <spdlog/spdlog.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <thread>

#include "backend/gpu_info.h"
#include "commands.h"
#include "config/params.h"
#include "core/ascii.h"
#include "core/exit_codes.h"
#include "data/image_header.h"
#include "dist/process_group.h"
#include "world_checks.h"

namespace trainer::cli {

/// Whether this build can train on GPUs: it has the CUDA backend.
#ifdef TRAINER_WITH_CUDA
constexpr bool kCudaTraining = true;
#else
constexpr bool kCudaTraining = false;
#endif

namespace {

/// The cores this process may run on (its CPU affinity mask, which a launcher may narrow; else every core).
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

int process_cores(int local_size) {
  // The host's cores shared by its processes, and at most those of the affinity mask: mpirun binds each of 2
  // processes or fewer to a core, more to a socket that several then share (8 processes on 2 sockets of 32
  // cores would each run 32 threads, 4 times the cores), and --map-by ...:PE=N gives each N.
  const int host = int(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, std::min(usable_cores(), host / std::max(1, local_size)));
}

Towers resolve_towers(const std::string& gpus, std::optional<int> threads, bool gpus_given,
                      const std::vector<GpuInfo>& found, const HostProcesses& host) {
  Towers t;
  t.plan = plan_devices(gpus, found, kCudaTraining, host);
  if (!gpus_given && found.empty())  // the default --gpus all's CPU fallback (its only warning then)
    spdlog::info("no GPU found; running on the CPU (one tower; --gpus cpu:N for N towers)");
  else
    for (const auto& w : t.plan.warnings) spdlog::warn("{}", w);
  const int hardware = usable_cores();
  const int cores = threads ? *threads : process_cores(host.size);
  if (cores > 2 * hardware)  // from fuzzing: --threads 4096 on 2 cores ran for minutes
    spdlog::warn("--threads {} is more than twice this machine's {} core(s); threads beyond the cores only wait for "
                 "each other: leave --threads out to use every core",
                 cores, hardware);
  t.threads_per_tower = std::max(1, cores / t.plan.towers());
  if (threads && *threads < t.plan.cpu_towers)  // cpu:4 --threads 1 runs 4 threads: said
    spdlog::warn("--threads {} is fewer than the {} CPU towers; each tower runs at least 1 thread ({} in all)",
                 *threads, t.plan.cpu_towers, t.plan.cpu_towers);
  spdlog::info("devices: {} ({} CPU thread(s) each)", t.plan.describe(), t.threads_per_tower);
  return t;
}

void require_one_process(const std::string& command) {
  if (const Launch l = detect_launch(); l.size > 1)
    throw UserError("trainer " + command + " runs in one process, but an MPI launcher started " +
                    std::to_string(l.size) + " (" + l.source + "), which would each do the whole work" +
                    (command == "evaluate" ? "" : " and write the same files") +
                    ": run it without mpirun or srun" +
                    (command == "export" ? "" : " (its --gpus all takes every GPU of the machine)"));
}

std::string launched_process_name() {
  const Launch l = detect_launch();
  if (l.size <= 1) return "";
  char name[256] = {};
  std::string host = gethostname(name, sizeof name - 1) == 0 ? name : "?";
  // Open MPI's processor name drops the domain (unless told to keep it): so does this one, IP addresses aside.
  if (!host.empty() && !std::isdigit(static_cast<unsigned char>(host[0]))) host = host.substr(0, host.find('.'));
  return process_name(l.rank, host) + ": ";
}

void name_launched_process() { set_error_origin(launched_process_name()); }

std::unique_ptr<ProcessGroup> join_run(double timeout_s, const std::exception_ptr& found, const std::string& command) {
  // Who reports `found` if the others do not join: the wait below (kFired), or, once join_world has returned
  // or failed (kSettled), this thread; the first to leave kWaiting.
  enum State : int { kWaiting, kSettled, kFired };
  const auto state = std::make_shared<std::atomic<int>>(kWaiting);
  if (detect_launch().size > 1) {
    // With an error of its own, this process prints it after kJoinWaitSeconds; else, after timeout_s, that the
    // others did not all join: one stopped or hung before MPI_Init, or ended without it (a process given
    // --version, or suspended at start, would leave the others waiting for ever).
    std::string message = "the other processes of the run did not all join it within " + fmt::format("{:g}", timeout_s) +
                          " s (training.collective_timeout): one of them stopped or hung before joining, or ended "
                          "without joining (a process given --version or --help, or a launch of other commands); "
                          "ending this process";
    double wait = timeout_s;
    int code = kExitInternalError;
    if (found) {
      try {
        std::rethrow_exception(found);
      } catch (const std::exception& e) {
        message = std::string(e.what()) + " (printed by this process: the others did not join it within " +
                  std::to_string(kJoinWaitSeconds) + " s)";
      }
      wait = kJoinWaitSeconds;
      code = kExitUserError;
    }
    // Named now: getenv while MPI_Init may set the environment would race.
    std::thread([state, origin = launched_process_name(), message, wait, code] {
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      int waiting = kWaiting;
      if (!state->compare_exchange_strong(waiting, kFired)) return;
      print_run_errors({{origin, message}});
      std::_Exit(code);
    }).detach();
  }
  const auto settle = [&] {  // the wait has printed, or prints now, and ends the process
    int waiting = kWaiting;
    if (!state->compare_exchange_strong(waiting, kSettled))
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  };
  std::unique_ptr<ProcessGroup> world;
  try {
    world = join_world(timeout_s);
  } catch (...) {
    settle();
    if (found) std::rethrow_exception(found);  // the first mistake, which may be the cause of this one
    throw;
  }
  settle();
  if (world) require_same_build(*world, command);  // first: other builds may run other collectives after it
  check_together(world.get(), [&] {
    if (found) std::rethrow_exception(found);
  });
  return world;
}

ConfigInWorld load_config_in_world(const std::string& path, const std::string& command,
                                   const std::function<void(Config&)>& adjust) {
  ConfigInWorld in;
  std::exception_ptr error;  // reported once the processes have joined, as the errors found later are
  try {
    if (path.empty()) throw UserError("--config is required; run 'trainer --help' for usage");
    in.config = load_config(path);
    if (adjust) adjust(in.config);
  } catch (const UserError&) {
    error = std::current_exception();
  }
  in.world =
      join_run(error ? TrainingConfig{}.collective_timeout : in.config.training.collective_timeout, error, command);
  return in;
}

int report_usage_error(const std::string& message) {
  if (detect_launch().size <= 1) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return kExitUserError;
  }
  return run_guarded([&] {
    name_launched_process();
    join_run(TrainingConfig{}.collective_timeout, std::make_exception_ptr(UserError(message)), "");
    return kExitUserError;  // not reached: join_run threw the error, once reported
  });
}

const CLI::Validator& non_empty_path() {
  static const CLI::Validator check(
      [](std::string& value) {
        return value.empty() ? std::string("the value is empty; give a path (is a shell variable unset?)")
                             : std::string();
      },
      "", "non_empty_path");
  return check;
}

std::string config_without_flag(const CLI::App& failed) {
  const std::vector<CLI::App*> chosen = failed.get_subcommands();
  const CLI::Option* config = (chosen.empty() ? failed : *chosen.front()).get_option_no_throw("--config");
  if (!config || config->count() > 0) return "";
  std::vector<std::string> extra = failed.remaining();
  for (const CLI::App* sub : failed.get_subcommands())
    for (const std::string& arg : sub->remaining()) extra.push_back(arg);
  for (const std::string& arg : extra) {
    const std::string ext = ascii_lower(std::filesystem::path(arg).extension().string());
    if (arg.rfind("-", 0) != 0 && (ext == ".yaml" || ext == ".yml"))
      return " (a config is given with --config: --config " + arg + ")";
  }
  return "";
}

std::string unexpected_arguments(const CLI::App& failed) {
  // The command the arguments were given to: the subcommand chosen, else `failed` (training).
  const std::vector<CLI::App*> chosen = failed.get_subcommands();
  const CLI::App& command = chosen.empty() ? failed : *chosen.front();
  std::vector<std::string> flags;
  for (const CLI::Option* o : command.get_options())
    for (const std::string& name : o->get_lnames()) flags.push_back("--" + name);
  std::vector<std::string> extra = failed.remaining();
  if (&command != &failed)
    for (const std::string& arg : command.remaining()) extra.push_back(arg);
  std::string args, hints;
  for (const std::string& arg : extra) {
    args += " " + arg;
    if (arg.rfind("--", 0) == 0) hints += did_you_mean(arg.substr(0, arg.find('=')), flags);
  }
  const std::string name = &command == &failed ? "trainer" : "trainer " + command.get_name();
  return "unexpected argument(s) for '" + name + "':" + args + hints;
}

namespace {

// The flag an argument names: "--name" of --name and --name=value, "-x" of -x and -xvalue.
std::string flag_of(const std::string& arg) {
  return arg[1] == '-' ? arg.substr(0, arg.find('=')) : arg.substr(0, 2);
}

}  // namespace

std::string misplaced_flags(const CLI::App& app) {
  const std::vector<CLI::App*> chosen = app.get_subcommands();
  if (chosen.empty()) return "";
  const CLI::App& command = *chosen.front();
  std::vector<std::string> takes, refuses;
  for (const CLI::Option* o : app.get_options()) {
    if (o->count() == 0 || o->get_lnames().empty()) continue;
    const std::string name = o->get_lnames().front();
    if (name == "help" || name == "version") continue;
    (command.get_option_no_throw("--" + name) ? takes : refuses).push_back("--" + name);
  }
  // A command's own flag before it, which training does not have (--checkpoint, export's -i), is left over
  // there, written --name, --name=value, -x or -xvalue.
  for (const std::string& arg : app.remaining()) {
    if (arg.size() < 2 || arg[0] != '-') continue;
    const CLI::Option* o = command.get_option_no_throw(flag_of(arg));
    if (!o || o->get_lnames().empty()) continue;
    const std::string name = "--" + o->get_lnames().front();
    if (std::find(takes.begin(), takes.end(), name) == takes.end()) takes.push_back(name);
  }
  if (takes.empty() && refuses.empty()) return "";
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& f : v) s += (s.empty() ? "" : ", ") + f;
    return s;
  };
  const std::string name = "'trainer " + command.get_name() + "'";
  std::string msg = name + " reads only the flags after it (those before it are the training run's): ";
  if (!takes.empty()) msg += "put " + list(takes) + " after '" + command.get_name() + "' (trainer " +
                             command.get_name() + " " + takes.front() + " ...)";
  if (!refuses.empty())
    msg += std::string(takes.empty() ? "" : "; ") + "it takes no " + list(refuses) + ": remove " +
           (refuses.size() > 1 ? "them" : "it");
  return msg;
}

std::string single_dash_long_flag(const CLI::App& app, int argc, const char* const* argv) {
  // The flags of the command given (the first argument naming one), else the training run's.
  const CLI::App* scope = &app;
  for (int i = 1; i < argc && scope == &app; ++i)
    for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; }))
      if (command->get_name() == argv[i]) scope = command;
  auto find = [&](const std::string& flag) -> const CLI::Option* {
    if (const CLI::Option* o = scope->get_option_no_throw(flag)) return o;
    return scope == &app ? nullptr : app.get_option_no_throw(flag);  // --help, --version
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.size() >= 2 && arg[0] == '-') {  // a flag taking a value: the next argument is that value
      if (const CLI::Option* o = find(flag_of(arg)); o && o->get_expected_min() > 0 && arg.find('=') == std::string::npos &&
                                             (arg[1] == '-' || arg.size() == 2)) {
        ++i;
        continue;
      }
    }
    if (arg.size() < 3 || arg[0] != '-' || arg[1] == '-') continue;
    const std::string flag = "-" + arg.substr(0, arg.find('='));
    if (const CLI::Option* o = find(flag); o && !o->get_lnames().empty())
      return "'" + arg + "' has one dash (one starts a short flag such as -c): write " + flag;
  }
  return "";
}

LoadedModel load_model(const std::string& checkpoint_path, const Towers& towers) {
  return trainer::load_model(checkpoint_path, towers.plan, towers.threads_per_tower);
}

void apply_image_pixel_limit(const std::optional<long long>& flag, const LoadedModel& m) {
  if (flag) set_image_pixel_limit(size_t(*flag), "--max-image-pixels");
  else
    set_image_pixel_limit(size_t(m.config->data.max_image_pixels),
                          "the checkpoint's data.max_image_pixels (--max-image-pixels overrides it)");
}

void refuse_threshold_for_classes(bool given, const LoadedModel& m, const std::string& checkpoint_path) {
  if (given && m.trainer->classes() > 0)
    throw UserError("--threshold applies to one-channel (sigmoid) models; '" + checkpoint_path + "' is a model of " +
                    std::to_string(m.trainer->classes()) + " classes, whose pixels take their most probable class: "
                    "drop --threshold");
}

void refuse_split_depth(bool given, bool instances, int classes) {
  if (!given) return;
  if (!instances)
    throw UserError("--split-depth sets how --instances splits touching nuclei: add --instances, or drop --split-depth");
  if (classes > 0)
    throw UserError("--split-depth splits the mask of a one-channel (sigmoid) model; this model has " +
                    std::to_string(classes) + " classes" +
                    (classes == 3 ? ", whose nuclei come from its interior and boundary classes" : "") +
                    ": drop --split-depth");
}

std::optional<TileOptions> TileFlags::options(const std::optional<CropConfig>& crop,
                                              const std::string& checkpoint) const {
  if (!tiles && !crop) {
    if (overlap || blend)
      throw UserError(std::string(overlap ? "--tile-overlap" : "--tile-blend") + " sets how tiles are placed, and '" +
                      checkpoint + "' was trained on resized images (no data.crop), which predict resizes: add "
                      "--tiles to predict it in tiles at each image's own size");
    return std::nullopt;
  }
  TileOptions t;
  if (crop) t = TileOptions{crop->tile_overlap, parse_tile_blend(crop->tile_blend), crop->scale};
  if (overlap) t.overlap = *overlap;
  if (blend) t.blend = parse_tile_blend(*blend);
  return t;
}

void add_tile_flags(CLI::App* cmd, TileFlags& f) {
  cmd->add_flag("--tiles", f.tiles,
                "Predict each image at its own size in tiles of the model's input size (sliding window, blended "
                "where they overlap) instead of resizing it to the input; --batch-size then counts tiles. A "
                "checkpoint trained on crops (data.crop) predicts so without it");
  cmd->add_option("--tile-overlap", f.overlap, "In tiles: the fraction of a tile's side its neighbours share, in "
                  "[0, 1) (default: the checkpoint's data.crop.tile_overlap, else 0.5)");
  cmd->add_option("--tile-blend", f.blend, "In tiles: how overlapping tiles are weighed: gaussian (sigma = tile / 8) "
                  "or linear (default: the checkpoint's data.crop.tile_blend, else gaussian)")
      ->check(CLI::IsMember({"gaussian", "linear"}));
}

}  // namespace trainer::cli
