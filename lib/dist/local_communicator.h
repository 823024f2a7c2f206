#pragma once
// LocalCommunicator: collectives among towers that are threads of this process
// (CPU towers, and towers sharing one GPU). Each collective is a
// reduce-scatter + all-gather over shared memory: rank r sums elements
// [r*n/size, (r+1)*n/size) over all ranks in rank order into a shared buffer,
// then every rank copies the result, so the sum is formed once and every rank
// receives the same bits. A rank whose tower is on a GPU stages its data
// through a host buffer of its own: copied to the host (which waits for the
// work queued before on its compute stream), reduced as above, copied back
// (ordered on that stream).
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.h"
#include "dist/communicator.h"

namespace trainer {

class LocalCommunicator : public Communicator {
 public:
  /// size ranks; devices[r] is rank r's tower device (empty: every rank on the
  /// CPU). Throws InternalError when devices is neither empty nor of size entries.
  explicit LocalCommunicator(int size, std::vector<Device> devices = {});
  int size() const override { return size_; }
  void all_reduce_sum(int rank, float* data, size_t n) override;
  void all_reduce_sum(int rank, double* data, size_t n) override;
  void broadcast(int rank, float* data, size_t n, int root) override;
  /// Wakes every rank blocked in (or later entering) a collective with an
  /// InternalError naming reason: a tower that failed calls this so that the
  /// others do not wait forever.
  void abort(const std::string& reason) override;

 private:
  template <typename T>
  void reduce(int rank, T* data, size_t n);
  /// The host memory holding rank's n values of data for a collective: data
  /// itself on a CPU rank, else the rank's staging buffer, filled from data
  /// when `fill`.
  template <typename T>
  T* host_view(int rank, T* data, size_t n, bool fill);
  /// Copies the host view back to a GPU rank's data (nothing on a CPU rank).
  template <typename T>
  void write_back(int rank, T* data, const T* host, size_t n);
  void barrier();
  /// Throws InternalError unless every rank passed the same collective and size
  /// (a mismatch would read past a buffer; all ranks see it and throw).
  void check_sizes() const;
  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  unsigned long generation_ = 0;
  bool aborted_ = false;
  std::string reason_;
  std::vector<void*> slots_;
  std::vector<size_t> bytes_;  ///< What each rank passed to the current collective.
  std::vector<float> fsum_;
  std::vector<double> dsum_;
  std::vector<Device> devices_;             ///< Per rank.
  std::vector<std::vector<char>> staging_;  ///< Per rank: host copies of a GPU rank's data.
};

}  // namespace trainer
