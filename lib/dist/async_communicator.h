#pragma once
// AsyncCommunicator: collectives among CPU towers (threads of this process,
// host memory) with NCCL's asynchronous semantics, so that the tests of the
// multi-tower engine catch on the CPU what only a run on several GPUs would
// show otherwise: a reduction's result read before wait(), a buffer written
// while its reduction still runs, ranks calling different collectives.
//
// Every call queues a collective in one of two lanes, as NCCL's communicator
// (dist/nccl_communicator.h) has one for the started reductions and one for
// the others: per lane, a helper thread runs its collectives in queue order,
// each once every rank has queued it, after a random delay of up to
// max_delay_us (0: none), so a lane's collective may run before an earlier one
// of the other lane. start_all_reduce_sum returns at once: the rank must
// neither read nor write the data until wait(ticket) or wait_all has returned
// (the helper reads every rank's input and writes the sum when it runs, which
// may be before or long after). all_reduce_sum and broadcast return once their
// collective, and so every earlier one of their lane, has run. Sums are formed
// once, over the ranks in rank order, and every rank receives the same bits
// (as LocalCommunicator's).
//
// The k-th collectives of all ranks must match (operation, element type,
// count, root), and so must the kind of each rank's k-th call (started or
// not: NCCL_LAUNCH_ORDER_IMPLICIT launches the two communicators' kernels in
// host order, so ranks that interleave them differently can deadlock): a rank
// whose call differs from the others' makes every rank's
// current and later calls throw InternalError naming both calls (NCCL would
// read past a buffer or hang). abort() does the same with its reason.
//
// The trainer takes it in place of the in-process communicator of CPU towers
// when the environment sets TRAINER_TEST_ASYNC_COMM (docs/towers.md;
// tests/CMakeLists.txt runs the multi-tower tests so, `ctest -L multigpu`).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dist/communicator.h"

namespace trainer {

/// The delays of an AsyncCommunicator.
struct AsyncCommOptions {
  double max_delay_us = 0;  ///< Each collective waits uniformly in [0, max_delay_us] before it runs.
  uint64_t seed = 0;        ///< Of the delays' generator.
};

/// The options TRAINER_TEST_ASYNC_COMM asks for: "<max delay in µs>[,<seed>]",
/// e.g. "200" or "200,7"; nullopt when the variable is unset or empty. Throws
/// UserError naming the variable and the form for any other text.
std::optional<AsyncCommOptions> async_comm_from_env();

class AsyncCommunicator final : public Communicator {
 public:
  /// size ranks (at least 1). Starts the helper threads.
  AsyncCommunicator(int size, AsyncCommOptions options);
  /// Stops the helpers; collectives not yet run are dropped.
  ~AsyncCommunicator() override;
  AsyncCommunicator(const AsyncCommunicator&) = delete;
  AsyncCommunicator& operator=(const AsyncCommunicator&) = delete;

  int size() const override { return size_; }
  void all_reduce_sum(int rank, float* data, size_t n) override;
  void all_reduce_sum(int rank, double* data, size_t n) override;
  void broadcast(int rank, float* data, size_t n, int root) override;
  int start_all_reduce_sum(int rank, float* data, size_t n) override;
  /// Blocks until the reduction of ticket has run.
  void wait(int rank, int ticket) override;
  /// Blocks until every collective rank queued has run; its tickets restart at 0.
  void wait_all(int rank) override;
  void synchronize(int rank) override;
  void abort(const std::string& reason) override;
  /// Rank's calls so far, one letter each: 's' start_all_reduce_sum, 'r'
  /// all_reduce_sum, 'b' broadcast (tests read when a step started its buckets).
  std::string history(int rank) const;

 private:
  /// One rank's part of a collective.
  struct Call {
    const char* op = "";    ///< "all_reduce_sum" or "broadcast".
    const char* type = "";  ///< "float" or "double".
    void* data = nullptr;
    size_t n = 0;
    int root = -1;          ///< Broadcast root; -1 otherwise.
  };
  struct Collective {
    std::vector<Call> calls;  ///< Per rank.
    int arrived = 0;
  };
  /// The started reductions' lane (0) or the others' (1), and its helper's state.
  struct Lane {
    std::deque<Collective> pending;  ///< Collective completed + i at i.
    uint64_t completed = 0;          ///< Collectives with a lower sequence number have run.
    std::vector<uint64_t> queued;    ///< Per rank: the collectives it has queued.
    std::mt19937_64 delays;
    std::vector<char> scratch;       ///< The helper's sum.
    bool executing = false;          ///< The helper is writing into the ranks' buffers (mu_ not held).
    std::thread helper;
  };
  static constexpr int kStarted = 0, kNow = 1;
  /// Queues rank's call in lane (its letter in the history); returns its
  /// collective's sequence number there. Throws InternalError once aborted, or
  /// when the call differs from another rank's of the same collective.
  uint64_t enqueue(int rank, int lane, const Call& call, char letter);
  /// Blocks until collective seq of lane has run (InternalError once aborted).
  void wait_for(int rank, int lane, uint64_t seq);
  /// Blocks until rank's collectives queued in lane so far have run.
  void drain(int rank, int lane);
  /// Marks every rank aborted with reason (mu_ held).
  void abort_locked(const std::string& reason);
  [[noreturn]] void throw_aborted(int rank) const;
  void check_rank(int rank) const;
  /// Lane's helper thread: runs its collectives in order.
  void run(Lane& lane);
  /// Runs one collective whose calls have all arrived (mu_ not held).
  void execute(Lane& lane, const Collective& c);

  int size_;
  AsyncCommOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Lane lanes_[2];
  std::vector<std::vector<uint64_t>> tickets_;  ///< Per rank: the sequence number of each ticket (lane 0).
  std::vector<std::string> history_;            ///< Per rank: history().
  bool aborted_ = false, stopping_ = false;
  std::string reason_;
};

}  // namespace trainer
