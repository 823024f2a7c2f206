#pragma once
// Communicator: collective operations among the towers (replicas) of one run.
// Every rank calls each collective, in the same order, with the same count.
// Data pointers are on the rank's tower device (host memory for a CPU tower,
// device memory for a GPU tower). On a CPU tower a call returns when all ranks
// have contributed; on a GPU tower it is ordered after the work queued so far
// on the tower's compute stream, and the compute stream's later work sees the
// result. Results are identical on every rank, so replicas that apply the same
// update stay identical.
#include <cstddef>
#include <string>

namespace trainer {

class Communicator {
 public:
  virtual ~Communicator() = default;
  /// Number of ranks (towers).
  virtual int size() const = 0;
  /// In place: data[i] <- sum over ranks of data[i]. n elements.
  virtual void all_reduce_sum(int rank, float* data, size_t n) = 0;
  /// Double-precision variant for counts that exceed float's 2^24 exact range
  /// (pixel counts of a validation set, loss sums).
  virtual void all_reduce_sum(int rank, double* data, size_t n) = 0;
  /// In place: every rank receives root's data. n elements.
  virtual void broadcast(int rank, float* data, size_t n, int root) = 0;

  /// Starts an in-place sum like all_reduce_sum and returns a ticket; the
  /// reduction may still run (NCCL: on the tower's communication stream, so it
  /// overlaps the rest of backward). wait(rank, ticket) makes the rank's later
  /// compute work wait for it. Tickets of a rank count up from 0 and restart
  /// after wait_all(rank). The default runs the reduction at once.
  virtual int start_all_reduce_sum(int rank, float* data, size_t n) {
    all_reduce_sum(rank, data, n);
    return next_ticket_[rank % kMaxRanks]++;
  }
  virtual void wait(int rank, int ticket) { (void)rank, (void)ticket; }
  /// Waits for every started reduction of rank and resets its tickets.
  virtual void wait_all(int rank) { next_ticket_[rank % kMaxRanks] = 0; }

  /// Returns once every collective rank has queued has completed on its
  /// device. Throws InternalError when one failed or did not complete within
  /// the communicator's timeout (NCCL: after aborting every rank). A GPU tower
  /// calls it before the host waits on its compute stream (a copy to the host,
  /// DeviceContext::synchronize) after a collective, so that a stuck collective
  /// raises instead of blocking forever. The default does nothing: CPU
  /// collectives have completed when they return.
  virtual void synchronize(int rank) { (void)rank; }
  /// Makes every rank's current and later collectives throw InternalError
  /// naming reason, so that the towers still running do not wait for one that
  /// failed. Callable from any thread (TowerPool's on_error). The default does
  /// nothing.
  virtual void abort(const std::string& reason) { (void)reason; }

 protected:
  static constexpr int kMaxRanks = 1024;
  int next_ticket_[kMaxRanks] = {};
};

}  // namespace trainer
