#pragma once
// The data of a run of several processes (an MPI launch): every process finds
// the same image/mask pairs, checks its share of them before training, and
// then decodes, step by step, only the samples its towers take
// (docs/multi_node.md).
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/sample_stream.h"
#include "dist/process_group.h"

namespace trainer::cli {

/// A folder pair's usable pairs as one process of the world streams them.
struct WorldPairs {
  std::unique_ptr<SampleStream> stream;  ///< The pairs left after the check, the same on every process.
  std::vector<size_t> class_pixels;      ///< options.classes >= 2: each class's pixels over all usable masks.
};

/// Finds options' pairs (find_image_pairs); every process must find the same
/// ones, else a UserError naming the first rank that differs and its host.
/// Then process r decodes pairs r, r + P, ... (check_pairs, P processes: each
/// pair once over the world), and the processes share what
/// they found, so that every one applies load_dataset's rules alike
/// (usable_pairs: the same UserError everywhere, or the same pairs dropped
/// with data.skip_bad_files). Either UserError is raised on every process,
/// printed once by rank 0 (ReportedUserError).
WorldPairs open_world_pairs(ProcessGroup& world, const DataOptions& options);

}  // namespace trainer::cli
