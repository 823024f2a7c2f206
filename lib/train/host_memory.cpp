#include "train/host_memory.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/held_samples.h"
#include "data/image_decode.h"
#include "data/image_header.h"

namespace trainer {

size_t held_bytes(const std::vector<ImagePair>& pairs, const DataOptions& o) {
  const size_t per_pixel = size_t(o.channels) + dtype_size(mask_storage(o.classes));
  if (o.native_scale <= 0) return pairs.size() * size_t(o.height) * size_t(o.width) * per_pixel;
  size_t pixels = 0;
  const size_t crop = size_t(o.height) * size_t(o.width);
  for (const ImagePair& p : pairs) {
    // One past the pixel limit is refused with its name when it is decoded: counted as a crop here.
    const std::optional<cv::Size> size = image_header_size(p.image);
    const size_t declared = size ? size_t(size->width) * size_t(size->height) : 0;
    const bool counted = size && (image_pixel_limit() == 0 || declared <= image_pixel_limit());
    const cv::Size held = counted ? scaled_size(*size, o.native_scale) : cv::Size();
    pixels += counted ? size_t(held.width) * size_t(held.height) : crop;
  }
  return pixels * per_pixel;
}

void require_host_memory(const HostMemoryPlan& plan, const MemoryLimit& limit, const std::string& config_path) {
  if (plan.total() <= limit.room()) return;
  std::string parts = fmt::format("{} training pairs held decoded ({})", plan.pairs, memory_size(plan.training));
  if (plan.validation_pairs > 0)
    parts += fmt::format(", {} validation pairs ({})", plan.validation_pairs, memory_size(plan.validation));
  if (plan.activations > 0)
    parts += fmt::format(", the layer outputs and gradients of a batch of {} ({})", plan.batch,
                         memory_size(plan.activations));
  throw UserError(fmt::format(
      "{}: this run needs at least {} more memory than it holds now ({}), and its cgroup's memory limit leaves "
      "{} ({} in {}, {} in use{}); past the limit the kernel would kill it while loading or training. Lower "
      "training.batch_size or the Input's size, train on fewer images (or with data.crop at a smaller scale), or "
      "raise the limit (docker run --memory, the pod's resources.limits.memory, Slurm's --mem)",
      config_path, memory_size(plan.total()), parts, memory_size(limit.room()), memory_size(limit.limit), limit.file,
      memory_size(limit.in_use), limit.swap > 0 ? ", " + memory_size(limit.swap) + " of swap" : ""));
}

}  // namespace trainer
