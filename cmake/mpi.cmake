# Decides TRAINER_WITH_MPI from TRAINER_MPI (AUTO/ON/OFF): on when CMake finds
# an MPI library (its C API; Debian: libopenmpi-dev). Then every lib/**/mpi/
# source is compiled into its folder's library (lib/CMakeLists.txt); without it, runs
# started by mpirun or srun with several processes are refused
# (dist/process_group.h).
set(TRAINER_WITH_MPI OFF)
if(NOT TRAINER_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(TRAINER_WITH_MPI ON)
  elseif(TRAINER_MPI STREQUAL "ON")
    message(FATAL_ERROR "TRAINER_MPI=ON but no MPI was found (install Open MPI: apt-get install libopenmpi-dev)")
  endif()
endif()
message(STATUS "trainer: MPI (multi-process runs) ${TRAINER_WITH_MPI}")
