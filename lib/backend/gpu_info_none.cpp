// list_gpus() for builds without the CUDA backend.
#ifndef TRAINER_WITH_CUDA
#include "backend/gpu_info.h"

namespace trainer {
std::vector<GpuInfo> list_gpus() { return {}; }
}  // namespace trainer
#endif
