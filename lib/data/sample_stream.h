#pragma once
// Image/mask pairs decoded when a training step needs them, for runs of
// several processes: each process decodes only the samples its towers take
// (docs/multi_node.md), one step ahead on the loader threads while the last
// step trains, and keeps none of them.
#include <future>
#include <vector>

#include "data/dataset.h"

namespace trainer {

class SampleStream {
 public:
  /// pairs: the run's pairs (find_image_pairs, less those usable_pairs
  /// dropped); options: their size, channels and classes, as load_dataset's.
  SampleStream(std::vector<ImagePair> pairs, DataOptions options);
  /// Waits for a decoding still running (its result is dropped).
  ~SampleStream();
  SampleStream(const SampleStream&) = delete;
  SampleStream& operator=(const SampleStream&) = delete;

  int size() const { return int(pairs_.size()); }
  /// The pairs' image file names, as Dataset::names.
  std::vector<std::string> names() const;

  /// Starts decoding pairs which[k] (indices < size()) in the background.
  void prefetch(std::vector<int> which);
  /// Sample k of the result is pair which[k], decoded as decode_pairs does:
  /// the prefetch's result when it was for the same pairs (waiting for it),
  /// else decoded now. Throws decode_pairs' UserError, saying that the file
  /// passed the check at the start, for a file that can no longer be decoded.
  Dataset take(const std::vector<int>& which);

 private:
  std::vector<ImagePair> pairs_;
  DataOptions options_;
  std::vector<int> pending_which_;  ///< What pending_ decodes.
  std::future<Dataset> pending_;
};

}  // namespace trainer
