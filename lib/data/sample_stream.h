#pragma once
// Image/mask pairs decoded when a training step needs them, for runs of
// several processes: each process decodes only the samples its towers take
// (docs/multi_node.md), one step ahead on the loader threads while the last
// step trains, into two buffers it reuses.
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

  /// Starts decoding pairs which[k] (indices < size()) in the background,
  /// into the buffer the last take() did not return.
  void prefetch(const std::vector<int>& which);
  /// Sample k of the result is pair which[k], decoded as decode_pairs does:
  /// the prefetch's result when it was for the same pairs (waiting for it),
  /// else decoded now. The result stays valid until the take() after next
  /// (a prefetch in between fills the other buffer). Throws decode_pairs'
  /// UserError, saying that the file passed the check at the start, for a
  /// file that can no longer be decoded.
  const Dataset& take(const std::vector<int>& which);

 private:
  std::vector<ImagePair> pairs_;
  DataOptions options_;
  Dataset buffers_[2];
  int fill_ = 0;                    ///< The buffer the next decoding fills.
  std::vector<int> pending_which_;  ///< What pending_ decodes (into buffers_[fill_]).
  std::future<void> pending_;
};

}  // namespace trainer
