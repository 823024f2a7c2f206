// make_nccl_communicator() and nccl_allows_shared_gpus() for builds without the CUDA backend.
#ifndef TRAINER_WITH_CUDA
#include "core/error.h"
#include "dist/nccl_communicator.h"

namespace trainer {

bool nccl_allows_shared_gpus() { return false; }

std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<Device>& devices, double timeout_seconds) {
  (void)devices, (void)timeout_seconds;
  throw InternalError("NCCL communicator requested, but this build has no CUDA backend (configured without CUDA)");
}

std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<Device>& devices, double timeout_seconds,
                                                     const NcclWorld& world) {
  (void)world;
  return make_nccl_communicator(devices, timeout_seconds);
}

}  // namespace trainer
#endif
