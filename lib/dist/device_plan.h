#pragma once
// Which devices the towers run on, from the --gpus flag:
//   all      every visible GPU; without one, one CPU tower (with a warning)
//   0,2,5    those GPU indices (CUDA ordinals, as Caffe and Darknet read them;
//            not a count as Keras's multi_gpu_model(gpus=8) was)
//   cpu      one CPU tower;  cpu:N  N CPU towers (exercises the multi-tower
//            engine without GPUs; N in [1, 64])
#include <string>
#include <vector>

#include "backend/gpu_info.h"

namespace trainer {

struct DevicePlan {
  int cpu_towers = 0;            ///< Number of CPU towers (0 when GPUs are used).
  std::vector<int> gpus;         ///< GPU ordinals, one tower each (repeats allowed).
  std::vector<std::string> warnings;
  int towers() const { return cpu_towers + int(gpus.size()); }
  /// "2 CPU towers" or "GPUs 0, 1".
  std::string describe() const;
};

/// Resolves spec against the visible gpus. cuda_training: whether this build
/// can train on GPUs; when it cannot, `all` falls back to the CPU with a
/// warning and explicit GPU indices are a UserError. Throws UserError for bad
/// syntax and for GPU indices that do not exist (listing the GPUs found).
DevicePlan plan_devices(const std::string& spec, const std::vector<GpuInfo>& gpus, bool cuda_training);

}  // namespace trainer
