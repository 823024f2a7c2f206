#pragma once
// GPUs visible to this process (CUDA_VISIBLE_DEVICES honoured by the CUDA runtime).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

namespace trainer {

struct GpuInfo {
  int index = 0;             ///< CUDA device ordinal.
  std::string name;          ///< e.g. "NVIDIA H200".
  size_t memory_bytes = 0;   ///< Total device memory.
  /// "GPU-<32 hex digits>" as nvidia-smi -L prints it: the physical GPU (or
  /// MIG instance) whatever its index in a process's CUDA_VISIBLE_DEVICES.
  std::string uuid;
};

/// The visible GPUs; empty when built without CUDA, when no driver is loaded or
/// when no device is present (never throws).
std::vector<GpuInfo> list_gpus();

/// A new execution context (streams, library handles, caching allocator) for
/// one tower on GPU `device` (a CUDA ordinal from list_gpus()), running
/// convolutions in `precision`. Throws InternalError when built without CUDA
/// or when the device cannot be initialised.
std::unique_ptr<DeviceContext> make_gpu_context(int device, Precision precision);

}  // namespace trainer
