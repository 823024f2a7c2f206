// list_gpus() and make_gpu_context() for builds without the CUDA backend.
#ifndef TRAINER_WITH_CUDA
#include "backend/gpu_info.h"
#include "core/error.h"

namespace trainer {

std::vector<GpuInfo> list_gpus() { return {}; }

std::unique_ptr<DeviceContext> make_gpu_context(int device, Precision) {
  throw InternalError("this trainer was built without CUDA, so cuda:" + std::to_string(device) +
                      " cannot be used; rebuild with -DTRAINER_CUDA=ON on a machine with the CUDA toolkit, "
                      "cuDNN and NCCL, or train on the CPU");
}

}  // namespace trainer
#endif
