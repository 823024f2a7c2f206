#include "world_data.h"

#include <spdlog/spdlog.h>

#include <cstdint>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/fnv1a.h"
#include "dist/process_group.h"

namespace trainer::cli {

namespace {

namespace fs = std::filesystem;

/// A process whose folders differ (a copy short of files on one host) would split the batches differently
/// and leave the others waiting: refused on every process (rank 0 prints it), naming each one's folders and
/// the first pair that differs.
void require_same_pairs(ProcessGroup& world, const std::vector<ImagePair>& pairs, const DataOptions& o) {
  uint64_t h = fnv1a({});
  std::string names;  // "<image>\t<mask>\n" per pair: the file names, as the folders may be mounted at other paths
  for (const ImagePair& p : pairs)
    names += fs::path(p.image).filename().string() + '\t' + fs::path(p.mask).filename().string() + '\n';
  h = fnv1a(names, h);
  const Gathered g = gather(world, std::to_string(pairs.size()) + ":" + std::to_string(h) + "\t" + o.images_dir +
                                       "' and '" + o.masks_dir);
  const auto key = [&](size_t r) { return g.text(r).substr(0, g.text(r).find('\t')); };
  const auto folders = [&](size_t r) { return "'" + g.text(r).substr(g.text(r).find('\t') + 1) + "'"; };
  size_t r = 1;
  while (r < g.all.size() && key(r) == key(0)) ++r;
  if (r == g.all.size()) return;
  // Every process found the difference: the lists, to name the first pair that differs (rank 0's folders alone
  // would be named for both, and no file).
  const auto list_of = [&](int root) {  // root's list, on every process (not every list on every process)
    uint64_t size = names.size();
    world.broadcast(&size, sizeof size, root);
    std::string list = world.rank() == root ? names : std::string(size_t(size), '\0');
    world.broadcast(list.data(), list.size(), root);
    return list;
  };
  const std::vector<std::string> lists = {list_of(0), list_of(int(r))};
  const auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  const std::vector<std::string> mine = lines(lists[1]), first = lines(lists[0]);
  const std::set<std::string> in_mine(mine.begin(), mine.end()), in_first(first.begin(), first.end());
  std::string differs;
  const auto alone = [&](const std::string& line, size_t who) {
    differs = " (the first that differs: '" + line.substr(0, line.find('\t')) + "' with mask '" +
              line.substr(line.find('\t') + 1) + "', on " + g.process(who) + " alone)";
  };
  for (const std::string& line : first)
    if (differs.empty() && !in_mine.count(line)) alone(line, 0);
  for (const std::string& line : mine)
    if (differs.empty() && !in_first.count(line)) alone(line, r);
  throw_alike(&world, g.process(r) + " found other image/mask pairs in " + folders(r) + " than " + g.process(0) +
                          " in " + folders(0) + differs +
                          ": every process of a run must see the same files (a shared file system, or identical "
                          "copies)");
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
  std::vector<double> counts = {double(mine.low_masks), double(mine.thresholded), double(mine.empty_masks),
                                double(mine.label_like), double(mine.images16), double(mine.multi_page)};
  for (size_t c : mine.class_pixels) counts.push_back(double(c));  // exact: far below 2^53 pixels
  counts.resize(6 + size_t(classes), 0.0);
  world.all_reduce_sum(counts.data(), counts.size());
  all.low_masks = int(counts[0]);
  all.thresholded = int(counts[1]);
  all.empty_masks = int(counts[2]);
  all.label_like = int(counts[3]);
  all.images16 = int(counts[4]);
  all.multi_page = int(counts[5]);
  for (int c = 0; c < classes; ++c) all.class_pixels.push_back(size_t(counts[6 + size_t(c)]));
  all.highest16 = mine.highest16;
  world.all_reduce_max(&all.highest16, 1);
  const auto first_of_all = [&](const std::string& own) {  // in name order over the processes' firsts
    std::string first;
    for (const std::string& theirs : world.all_gather(own)) keep_first(first, theirs);
    return first;
  };
  all.first_label_like = first_of_all(mine.first_label_like);
  all.first_multi_page = first_of_all(mine.first_multi_page);
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
