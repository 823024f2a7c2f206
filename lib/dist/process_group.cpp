#include "dist/process_group.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
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

}  // namespace

Launch detect_launch(const char* (*env)(const char*)) {
  if (!env) env = system_env;
  Launch l;
  // Open MPI's mpirun, then the process-management interfaces srun and other launchers set.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const int n = positive(env(name))) {
      l.by_launcher = true;
      l.size = n;
      l.source = std::string(name) + "=" + env(name);
      return l;
    }
  }
  if (const char* rank = env("PMIX_RANK"); rank && *rank) {  // PMIx names no size in the environment
    l.by_launcher = true;
    l.source = std::string("PMIX_RANK=") + rank;
    return l;
  }
  if (const int n = positive(env("SLURM_NTASKS")); n > 1 && env("SLURM_PROCID")) {
    l.by_launcher = true;
    l.size = n;
    l.source = "SLURM_NTASKS=" + std::to_string(n);
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
