#include "world_data.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <sstream>

#include "core/error.h"

namespace trainer::cli {

namespace {

namespace fs = std::filesystem;

/// A process whose folders differ (a copy short of files on one host) would split the batches differently
/// and leave the others waiting: refused on every process, naming the first that differs.
void require_same_pairs(ProcessGroup& world, const std::vector<ImagePair>& pairs, const DataOptions& o) {
  size_t h = 0;
  for (const ImagePair& p : pairs)  // the file names: the folders may be mounted at other paths
    h = h * 1000003u + std::hash<std::string>{}(fs::path(p.image).filename().string() + '\n' +
                                                fs::path(p.mask).filename().string());
  const std::vector<std::string> all =
      world.all_gather(world.host() + "\n" + std::to_string(pairs.size()) + ":" + std::to_string(h));
  const auto host = [&](size_t r) { return all[r].substr(0, all[r].find('\n')); };
  const auto found = [&](size_t r) { return all[r].substr(all[r].find('\n') + 1); };
  for (size_t r = 1; r < all.size(); ++r)
    if (found(r) != found(0))
      throw UserError("rank " + std::to_string(r) + " (host " + host(r) + ") found other image/mask pairs than "
                      "rank 0 (host " + host(0) + ") in '" + o.images_dir + "' and '" + o.masks_dir +
                      "': every process of a run must see the same data at the same path (a shared file system, "
                      "or identical copies)");
}

/// Every process's check merged: the errors of all pairs, the counts summed.
PairCheck merge_checks(ProcessGroup& world, const PairCheck& mine, int classes) {
  std::string text;  // "<pair index>\t<message>\n" per error (UserError messages are one line)
  for (const auto& [index, why] : mine.errors) text += std::to_string(index) + "\t" + why + "\n";
  PairCheck all;
  for (const std::string& theirs : world.all_gather(text)) {
    std::istringstream lines(theirs);
    for (std::string line; std::getline(lines, line);) {
      const size_t tab = line.find('\t');
      all.errors[std::atoi(line.substr(0, tab).c_str())] = line.substr(tab + 1);
    }
  }
  std::vector<double> counts = {double(mine.pairs), double(mine.low_masks), double(mine.thresholded)};
  for (size_t c : mine.class_pixels) counts.push_back(double(c));  // exact: far below 2^53 pixels
  counts.resize(3 + size_t(classes), 0.0);
  world.all_reduce_sum(counts.data(), counts.size());
  all.pairs = int(counts[0]);
  all.low_masks = int(counts[1]);
  all.thresholded = int(counts[2]);
  for (int c = 0; c < classes; ++c) all.class_pixels.push_back(size_t(counts[3 + size_t(c)]));
  return all;
}

}  // namespace

WorldPairs open_world_pairs(ProcessGroup& world, const DataOptions& o) {
  std::vector<ImagePair> pairs = find_image_pairs(o);
  require_same_pairs(world, pairs, o);
  const int n = int(pairs.size());
  std::vector<int> share;
  for (int i = world.rank(); i < n; i += world.size()) share.push_back(i);
  spdlog::info("{} image/mask pairs in '{}': each of the {} processes checks its share before training, then "
               "decodes only the samples its towers take, step by step",
               n, o.images_dir, world.size());
  const PairCheck found = merge_checks(world, check_pairs(pairs, share, o), o.classes);
  std::vector<ImagePair> usable;
  for (int i : usable_pairs(found, n, o)) usable.push_back(pairs[size_t(i)]);
  return {std::make_unique<SampleStream>(std::move(usable), o), found.class_pixels};
}

}  // namespace trainer::cli
