#pragma once
// The ProcessGroup of an MPI launch (lib/dist/mpi/mpi_process_group.cpp;
// builds without MPI link mpi_process_group_none.cpp). join_world calls it (and test_mpi_runs).
#include <memory>

#include "dist/process_group.h"

namespace trainer {

/// Initialises MPI (MPI_Init_thread, MPI_THREAD_SERIALIZED: the calls come
/// from one thread at a time, not always the main one), with errors returned
/// rather than fatal, and returns MPI_COMM_WORLD as a ProcessGroup whose
/// collectives give up after timeout_s seconds. The group's destructor calls
/// MPI_Finalize unless a collective failed or an exception is in flight.
/// Throws InternalError when MPI cannot be initialised (or this build has no MPI).
std::unique_ptr<ProcessGroup> make_mpi_process_group(double timeout_s);

}  // namespace trainer
