// make_mpi_process_group() for builds without MPI (TRAINER_MPI off, or Open MPI not found).
#ifndef TRAINER_WITH_MPI
#include "core/error.h"
#include "dist/mpi_process_group.h"

namespace trainer {

std::unique_ptr<ProcessGroup> make_mpi_process_group(double timeout_s) {
  (void)timeout_s;
  throw InternalError("MPI process group requested, but this build has no MPI (configured without Open MPI)");
}

bool mpi_built() { return false; }

}  // namespace trainer
#endif
