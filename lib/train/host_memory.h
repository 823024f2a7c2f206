#pragma once
// The host memory a training run needs before its first step, planned
// before anything is decoded against the room a cgroup's memory limit
// leaves (core/memory_limit.h): past that limit the kernel kills the run
// (exit 137, no message), so a data set or batch that cannot fit is refused
// with one instead, as a GPU shard that does not fit is.
#include <cstddef>
#include <string>
#include <vector>

#include "core/memory_limit.h"
#include "data/dataset.h"

namespace trainer {

/// What a run will add to the memory in use once it has started (bytes;
/// lower bounds: 8-bit images, outputs without their gradients).
struct HostMemoryPlan {
  size_t training = 0;     ///< The training pairs held decoded (held_bytes).
  size_t validation = 0;   ///< The validation pairs held decoded.
  /// The CPU towers' layer outputs and gradients for one batch (Trainer::host_activation_bytes).
  size_t activations = 0;
  int pairs = 0, validation_pairs = 0;  ///< How many pairs each set holds.
  int batch = 0;           ///< training.batch_size (global).
  size_t total() const { return training + validation + activations; }
};

/// Bytes load_dataset holds for pairs under options (data/held_samples.h):
/// H x W x C bytes of image and H x W of mask a pair (2 for masks beyond 255
/// classes); with options.native_scale each pair at its image header's size
/// times the scale (a header that cannot be read, or one past the pixel
/// limit, which decoding refuses by name, counts as the crop size).
/// 16-bit images take twice their count: this is a lower bound.
size_t held_bytes(const std::vector<ImagePair>& pairs, const DataOptions& options);

/// Throws UserError when plan.total() exceeds limit.room(), giving each part
/// of the plan, the limit, its file and what is in use, and what to lower
/// (training.batch_size, the input size, the images, or the limit itself).
/// config_path begins the message.
void require_host_memory(const HostMemoryPlan& plan, const MemoryLimit& limit, const std::string& config_path);

}  // namespace trainer
