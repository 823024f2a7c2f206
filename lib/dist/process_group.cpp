#include "dist/process_group.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/exit_codes.h"
#include "dist/mpi_process_group.h"

namespace trainer {

namespace {

/// A positive integer from text, else 0.
int positive(const char* text) {
  if (!text || !*text) return 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  return *end == '\0' && v > 0 && v < (1 << 30) ? int(v) : 0;
}

const char* system_env(const char* name) { return std::getenv(name); }

/// A rank from text: a whole number >= 0, else 0.
int rank_of(const char* text) { return text && std::string(text) == "0" ? 0 : positive(text); }

/// Rank 0 prints errors, then every process waits for it and throws them as reported.
[[noreturn]] void report_and_throw(ProcessGroup& world, const std::vector<RunError>& errors) {
  if (world.rank() == 0) print_run_errors(errors);
  try {
    double printed = 0;
    world.all_reduce_sum(&printed, 1);
  } catch (const std::exception&) {  // a process ended meanwhile, maybe rank 0 before it printed
    if (world.rank() != 0) throw UserError(errors.front().origin + errors.front().message);  // printed here then
  }
  throw ReportedUserError(errors.front().message);
}

}  // namespace

std::string process_name(int rank, const std::string& host) {
  return "rank " + std::to_string(rank) + " (host " + host + ")";
}

Gathered gather(ProcessGroup& world, const std::string& text) { return {world.all_gather(world.host() + "\n" + text)}; }

void throw_alike(ProcessGroup* world, const std::string& message) {
  if (!world || world->size() == 1) throw UserError(message);
  report_and_throw(*world, {{"", message}});
}

void check_together(ProcessGroup* world, const std::function<void()>& check) {
  if (!world || world->size() == 1) return check();
  std::string mine;  // "" when it passed
  try {
    check();
  } catch (const UserError& e) {
    mine = std::string("!") + e.what();  // "!": failed, even with an empty message
  }
  const Gathered g = gather(*world, mine);
  std::vector<RunError> errors;
  for (size_t r = 0; r < g.all.size(); ++r)
    if (const std::string text = g.text(r); !text.empty()) errors.push_back({g.process(r) + ": ", text.substr(1)});
  if (errors.empty()) return;
  const bool alike = errors.size() == g.all.size() && std::all_of(errors.begin(), errors.end(), [&](const RunError& e) {
                       return e.message == errors[0].message;
                     });
  if (alike) throw_alike(world, errors[0].message);
  report_and_throw(*world, errors);
}

Launch detect_launch(const char* (*env)(const char*)) {
  if (!env) env = system_env;
  Launch l;
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* r = env(name); r && *r) {
      l.rank = rank_of(r);
      break;
    }
  // Open MPI's mpirun, then the process-management interfaces srun and other launchers set.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const int n = positive(env(name))) {
      l.by_launcher = true;
      l.size = n;
      l.source = std::string(name) + "=" + env(name);
      return l;
    }
  }
  // A task of srun (a job step): SLURM_STEP_NUM_TASKS. sbatch's own shell has SLURM_NTASKS and
  // SLURM_PROCID but no step, and a command run there is a plain run.
  const int step_tasks = positive(env("SLURM_STEP_NUM_TASKS"));
  if (const char* rank = env("PMIX_RANK"); rank && *rank) {  // PMIx names no size in the environment; srun does
    l.by_launcher = true;
    l.size = std::max(1, step_tasks);
    l.source = std::string("PMIX_RANK=") + rank +
               (step_tasks ? ", SLURM_STEP_NUM_TASKS=" + std::to_string(step_tasks) : std::string());
    return l;
  }
  if (step_tasks > 1) {
    l.by_launcher = true;
    l.size = step_tasks;
    l.source = "SLURM_STEP_NUM_TASKS=" + std::to_string(step_tasks);
  }
  return l;
}

std::unique_ptr<ProcessGroup> join_world(double timeout_s) {
  const Launch l = detect_launch();
  if (!l.by_launcher) return nullptr;
  if (!mpi_built()) {
    if (l.size <= 1) return nullptr;  // one process under a launcher: a plain run
    throw UserError("this process is one of " + std::to_string(l.size) + " started by an MPI launcher (" + l.source +
                    "), but this trainer was built without MPI, so each would train alone: install Open MPI "
                    "(apt-get install libopenmpi-dev openmpi-bin) and rebuild (scripts/setup.sh), or start one "
                    "process");
  }
  std::unique_ptr<ProcessGroup> g = make_mpi_process_group(timeout_s);
  if (l.size > 1 && g->size() == 1)
    throw UserError("the launcher started " + std::to_string(l.size) + " processes (" + l.source +
                    "), but MPI sees this one alone, so each would train alone into the same folder: under Slurm "
                    "start them with srun --mpi=pmix (see srun --mpi=list), or use mpirun");
  return g;
}

}  // namespace trainer
