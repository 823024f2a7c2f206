#include "data/sample_stream.h"

#include "core/error.h"

#include <filesystem>
#include <string>
#include <utility>

namespace trainer {

SampleStream::SampleStream(std::vector<ImagePair> pairs, DataOptions options)
    : pairs_(std::move(pairs)), options_(std::move(options)) {}

SampleStream::~SampleStream() {
  if (pending_.valid()) pending_.wait();
}

std::vector<std::string> SampleStream::names() const {
  std::vector<std::string> out;
  for (const ImagePair& p : pairs_) out.push_back(std::filesystem::path(p.image).filename().string());
  return out;
}

void SampleStream::prefetch(const std::vector<int>& which) {
  if (pending_.valid()) pending_.wait();  // one decoding at a time: the loader threads are its
  pending_which_ = which;  // a copy into kept memory
  pending_ = std::async(std::launch::async,
                        [this, &out = buffers_[fill_]] { decode_pairs(pairs_, pending_which_, options_, out); });
}

const Dataset& SampleStream::take(const std::vector<int>& which) {
  Dataset& out = buffers_[fill_];
  fill_ = 1 - fill_;  // the next decoding leaves `out` to the caller
  try {
    if (pending_.valid()) {
      if (pending_which_ == which) {
        pending_.get();  // rethrows its error
        return out;
      }
      pending_.wait();  // a prefetch of other pairs: dropped, with its error
      pending_ = {};
    }
    decode_pairs(pairs_, which, options_, out);
    return out;
  } catch (const UserError& e) {
    throw UserError(std::string(e.what()) + " (the run's check found every pair usable when it started: the file "
                    "has changed since, or this host's copy differs from the one checked; every process must see "
                    "the same files)");
  }
}

}  // namespace trainer
