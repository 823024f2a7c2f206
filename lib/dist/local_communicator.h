#pragma once
// LocalCommunicator: collectives among towers that are threads of this process
// (CPU towers now; several towers sharing one GPU later). Each collective is a
// reduce-scatter + all-gather over shared memory: rank r sums elements
// [r*n/size, (r+1)*n/size) over all ranks in rank order into a shared buffer,
// then every rank copies the result, so the sum is formed once and every rank
// receives the same bits.
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace trainer {

class LocalCommunicator : public Communicator {
 public:
  explicit LocalCommunicator(int size);
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
};

}  // namespace trainer
