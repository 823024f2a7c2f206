#pragma once
// GPUs visible to this process (CUDA_VISIBLE_DEVICES honoured by the CUDA runtime).
#include <cstddef>
#include <string>
#include <vector>

namespace trainer {

struct GpuInfo {
  int index = 0;             ///< CUDA device ordinal.
  std::string name;          ///< e.g. "NVIDIA H200".
  size_t memory_bytes = 0;   ///< Total device memory.
};

/// The visible GPUs; empty when built without CUDA, when no driver is loaded or
/// when no device is present (never throws).
std::vector<GpuInfo> list_gpus();

}  // namespace trainer
