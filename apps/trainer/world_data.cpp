#include "world_data.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/fnv1a.h"
#include "dist/process_group.h"

namespace trainer::cli {

namespace {

namespace fs = std::filesystem;

/// A process whose folders differ (a copy short of files on one host) would split the batches differently
/// and leave the others waiting: refused on every process (rank 0 prints it, naming its own folders), naming
/// the first that differs.
void require_same_pairs(ProcessGroup& world, const std::vector<ImagePair>& pairs, const DataOptions& o) {
  uint64_t h = fnv1a({});
  for (const ImagePair& p : pairs)  // the file names: the folders may be mounted at other paths
    h = fnv1a(fs::path(p.image).filename().string() + '\n' + fs::path(p.mask).filename().string() + '\n', h);
  const Gathered g = gather(world, std::to_string(pairs.size()) + ":" + std::to_string(h));
  for (size_t r = 1; r < g.all.size(); ++r)
    if (g.text(r) != g.text(0))
      throw_alike(&world, g.process(r) + " found other image/mask pairs than " + g.process(0) + " in '" +
                              o.images_dir + "' and '" + o.masks_dir +
                              "': every process of a run must see the same files (a shared file system, or "
                              "identical copies)");
}

/// Every process's check merged: the errors of all pairs, the counts summed.
PairCheck merge_checks(ProcessGroup& world, const PairCheck& mine, int classes) {
  std::string text;  // "<pair index> <message length> <message>" per error
  for (const auto& [index, why] : mine.errors)
    text += std::to_string(index) + " " + std::to_string(why.size()) + " " + why;
  PairCheck all;
  for (const std::string& theirs : world.all_gather(text)) {
    std::istringstream in(theirs);
    int index = 0;
    size_t length = 0;
    while (in >> index >> length && in.get() == ' ') {
      std::string why(length, '\0');
      in.read(why.data(), std::streamsize(length));
      all.errors[index] = why;
    }
  }
  std::vector<double> counts = {double(mine.low_masks), double(mine.thresholded), double(mine.empty_masks)};
  for (size_t c : mine.class_pixels) counts.push_back(double(c));  // exact: far below 2^53 pixels
  counts.resize(3 + size_t(classes), 0.0);
  world.all_reduce_sum(counts.data(), counts.size());
  all.low_masks = int(counts[0]);
  all.thresholded = int(counts[1]);
  all.empty_masks = int(counts[2]);
  for (int c = 0; c < classes; ++c) all.class_pixels.push_back(size_t(counts[3 + size_t(c)]));
  return all;
}

}  // namespace

WorldPairs open_world_pairs(ProcessGroup& world, const DataOptions& o) {
  std::vector<ImagePair> pairs;
  check_together(&world, [&] { pairs = find_image_pairs(o); });  // a host's folder may be missing
  require_same_pairs(world, pairs, o);
  const int n = int(pairs.size());
  std::vector<int> share;
  for (int i = world.rank(); i < n; i += world.size()) share.push_back(i);
  spdlog::info("{} {}image/mask pairs in '{}': each of the {} processes checks its share before training, then "
               "decodes only the samples its towers take",
               n, o.key_prefix.empty() ? "" : "validation ", o.images_dir, world.size());
  const PairCheck found = merge_checks(world, check_pairs(pairs, share, o), o.classes);
  std::vector<ImagePair> usable;
  check_together(&world, [&] {
    for (int i : usable_pairs(found, n, o)) usable.push_back(pairs[size_t(i)]);
  });
  return {std::make_unique<SampleStream>(std::move(usable), o), found.class_pixels};
}

}  // namespace trainer::cli
