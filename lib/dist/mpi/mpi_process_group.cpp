// MpiProcessGroup: dist/mpi_process_group.h's ProcessGroup over MPI_COMM_WORLD.
//
// Collectives are the non-blocking forms (MPI_Iallreduce, MPI_Ibcast,
// MPI_Iallgather), completed by polling MPI_Test against the group's timeout:
// a blocking call would wait forever for a process that hangs. A collective
// that fails or times out marks the group failed; the destructor then skips
// MPI_Finalize (it would wait for the abandoned collective), the process ends
// with our error and exit code, and the launcher ends the others. Errors are
// returned (MPI_ERRORS_RETURN), not fatal, so that they carry our message.
//
// A collective that times out names the processes it waits for: every
// process that timed out sends each other one, point to point on a
// communicator of its own, the number of collectives it has entered, and
// waits a grace period (the timeout, at most 10 s) for theirs. Those that
// do not answer are hung, dead, or busy outside MPI; one that answers with
// another number is at another collective (collectives match in order, so
// that is a bug of ours, and the message says so). A timed-out NCCL
// collective asks the same (unanswered()).
// MPI's C API only: Open MPI's and MPICH's mpi.h otherwise pull in the removed C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/mpi_process_group.h"

namespace trainer {

namespace {

using Clock = std::chrono::steady_clock;

/// MPI's text for an error code.
std::string mpi_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, size_t(len));
}

class MpiProcessGroup final : public ProcessGroup {
 public:
  explicit MpiProcessGroup(double timeout_s) : timeout_s_(timeout_s) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        throw InternalError("MPI_Init_thread failed");
      owns_mpi_ = true;
      if (provided < MPI_THREAD_SERIALIZED)
        fail("MPI_Init_thread", "this MPI library gives thread level " + std::to_string(provided) +
                                    ", below MPI_THREAD_SERIALIZED, which the towers' threads need");
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
    host_.assign(name, size_t(len));
    MPI_Comm node = MPI_COMM_NULL;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
          "MPI_Comm_split_type");
    check(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank (node)");
    check(MPI_Comm_size(node, &local_size_), "MPI_Comm_size (node)");
    MPI_Comm_free(&node);
    check(MPI_Comm_dup(MPI_COMM_WORLD, &probe_), "MPI_Comm_dup");
    hosts_ = all_gather(host_);
  }

  ~MpiProcessGroup() override {
    // MPI_Finalize waits for every process and for collectives left running: after a failure, or while an
    // exception unwinds (this process stops early), it could wait forever. Leaving without it makes the
    // launcher end the job.
    if (!owns_mpi_ || failed_ || std::uncaught_exceptions() > 0) return;
    // A process that failed after the last collective (rank 0 writing final.h5) never comes to the end: a
    // barrier bounded by the timeout first, then the job is ended rather than left waiting in MPI_Finalize.
    MPI_Request req = MPI_REQUEST_NULL;
    if (size_ > 1 && (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS || !wait_for(req))) {
      std::fprintf(stderr, "rank %d (host %s): error: the other processes did not reach the end of the run within "
                           "%g s (training.collective_timeout); ending every process\n",
                   rank_, host_.c_str(), timeout_s_);
      MPI_Abort(MPI_COMM_WORLD, 1);
      return;
    }
    MPI_Comm_free(&probe_);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  const std::string& host() const override { return host_; }

  void all_reduce_sum(float* data, size_t n) override { all_reduce(data, n, MPI_FLOAT, MPI_SUM, "float"); }
  void all_reduce_sum(double* data, size_t n) override { all_reduce(data, n, MPI_DOUBLE, MPI_SUM, "double"); }
  void all_reduce_max(double* data, size_t n) override { all_reduce(data, n, MPI_DOUBLE, MPI_MAX, "double"); }

  std::string unanswered() override {
    if (size_ == 1) return "";
    // Another thread in a collective holds the lock until that ends (its own timeout): not waited for.
    const std::unique_lock<std::timed_mutex> lock(mu_, std::chrono::duration<double>(grace()));
    if (!lock.owns_lock()) return "";
    failed_ = true;  // the probe's messages are left behind: no MPI_Finalize
    if (laggards_.empty()) stalled_ = 0;  // that of an earlier MPI collective, not of the one that timed out
    return laggards();
  }

  void broadcast(void* data, size_t bytes, int root) override {
    const std::lock_guard<std::timed_mutex> lock(mu_);
    const std::string what = "broadcast of " + std::to_string(bytes) + " bytes from rank " + std::to_string(root);
    if (failed_) fail(what, "was not started: an earlier collective of this process failed");
    for (size_t done = 0; done < bytes;) {  // MPI counts are int
      const int part = int(std::min<size_t>(bytes - done, size_t(1) << 30));
      MPI_Request req = MPI_REQUEST_NULL;
      ++entered_;
      check(MPI_Ibcast(static_cast<char*>(data) + done, part, MPI_BYTE, root, MPI_COMM_WORLD, &req), what);
      complete(req, what);
      done += size_t(part);
    }
  }

  std::vector<std::string> all_gather(const std::string& text) override {
    const std::lock_guard<std::timed_mutex> lock(mu_);
    if (failed_) fail("all_gather", "was not started: an earlier collective of this process failed");
    int mine = int(text.size());
    std::vector<int> lengths(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
    MPI_Request req = MPI_REQUEST_NULL;
    ++entered_;
    check(MPI_Iallgather(&mine, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD, &req), "all_gather (lengths)");
    complete(req, "all_gather (lengths)");
    int total = 0;
    for (int r = 0; r < size_; ++r) offsets[size_t(r)] = total, total += lengths[size_t(r)];
    std::string all(size_t(total), '\0');
    ++entered_;
    check(MPI_Iallgatherv(text.data(), mine, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                          MPI_COMM_WORLD, &req),
          "all_gather");
    complete(req, "all_gather");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(size_t(offsets[size_t(r)]), size_t(lengths[size_t(r)])));
    return out;
  }

 private:
  void all_reduce(void* data, size_t n, MPI_Datatype type, MPI_Op op, const char* type_name) {
    const std::lock_guard<std::timed_mutex> lock(mu_);
    const std::string what = std::string(op == MPI_MAX ? "all_reduce_max" : "all_reduce_sum") + " of " +
                             std::to_string(n) + " " + type_name + (n == 1 ? "" : "s");
    if (failed_) fail(what, "was not started: an earlier collective of this process failed");
    int type_size = 0;
    MPI_Type_size(type, &type_size);
    for (size_t done = 0; done < n;) {  // MPI counts are int
      const int part = int(std::min<size_t>(n - done, size_t(1) << 30));
      MPI_Request req = MPI_REQUEST_NULL;
      ++entered_;
      check(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + done * size_t(type_size), part, type, op,
                           MPI_COMM_WORLD, &req),
            what);
      complete(req, what);
      done += size_t(part);
    }
  }

  /// Polls req until it completes (yielding for the first millisecond, then sleeping 100 us a round):
  /// false when the timeout passes first or MPI_Test fails.
  /// Sets stalled_ to the longest time between two polls: a process that was suspended (SIGSTOP) or starved of
  /// CPU times out on waking, and laggards() then says so.
  bool wait_for(MPI_Request& req) {
    const Clock::time_point start = Clock::now();
    Clock::time_point polled = start;
    stalled_ = 0;
    for (;;) {
      int done = 0;
      if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
      if (done) return true;
      const Clock::time_point now = Clock::now();
      stalled_ = std::max(stalled_, std::chrono::duration<double>(now - polled).count());
      polled = now;
      const double waited = std::chrono::duration<double>(now - start).count();
      if (waited > timeout_s_) return false;
      if (waited < 1e-3) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  /// wait_for(req), failing with what's name when it does not complete.
  void complete(MPI_Request& req, const std::string& what) {
    int done = 0;
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
    if (done || wait_for(req)) return;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeout_s_);
    fail(what, std::string("did not complete within ") + seconds + " s (training.collective_timeout): " +
                   laggards());
  }

  /// After a collective timed out: which processes it waits for, found by asking every other process which
  /// collective it is at (see the top of this file), e.g. "rank 1 (host b) did not answer within 3 s: hung,
  /// died, or busy outside MPI". Asks once (the group fails after it); later calls return the first's text.
  /// How long laggards() waits for the answers: the timeout, at most 10 s.
  double grace() const { return std::min(timeout_s_, 10.0); }

  std::string laggards() {
    if (!laggards_.empty()) return laggards_;
    const double grace = this->grace();
    probe_entered_ = entered_;  // the sends' buffer: a send to a hung process stays pending
    std::vector<long long> theirs(static_cast<size_t>(size_), -1);
    std::vector<MPI_Request> receives(static_cast<size_t>(size_), MPI_REQUEST_NULL);
    std::string unasked;  // those the probe could not be sent to
    for (int r = 0; r < size_; ++r) {
      MPI_Request send = MPI_REQUEST_NULL;
      if (r == rank_) continue;
      if (MPI_Isend(&probe_entered_, 1, MPI_LONG_LONG, r, 0, probe_, &send) != MPI_SUCCESS) {
        unasked += (unasked.empty() ? "rank " : ", ") + std::to_string(r);
        theirs[size_t(r)] = entered_;  // not named as silent: it was not asked
        continue;
      }
      MPI_Request_free(&send);  // it completes, or not, on its own
      MPI_Irecv(&theirs[size_t(r)], 1, MPI_LONG_LONG, r, 0, probe_, &receives[size_t(r)]);
    }
    for (const Clock::time_point start = Clock::now();
         std::chrono::duration<double>(Clock::now() - start).count() < grace;) {
      bool waiting = false;
      for (MPI_Request& req : receives) {
        int done = 0;  // a failed test: still waiting (cancelled below, so that nothing writes `theirs` later)
        if (req != MPI_REQUEST_NULL && MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) continue;
        waiting = waiting || req != MPI_REQUEST_NULL;
      }
      if (!waiting) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::string silent, other;
    for (int r = 0; r < size_; ++r) {
      if (receives[size_t(r)] != MPI_REQUEST_NULL) {  // unanswered: cancelled, so that nothing writes `theirs` later
        MPI_Cancel(&receives[size_t(r)]);
        MPI_Wait(&receives[size_t(r)], MPI_STATUS_IGNORE);
      }
      const std::string who =
          "rank " + std::to_string(r) + (size_t(r) < hosts_.size() ? " (host " + hosts_[size_t(r)] + ")" : "");
      if (r != rank_ && theirs[size_t(r)] < 0) silent += (silent.empty() ? "" : ", ") + who;
      if (r != rank_ && theirs[size_t(r)] >= 0 && theirs[size_t(r)] != entered_)
        other += (other.empty() ? "" : ", ") + who + " at its collective " + std::to_string(theirs[size_t(r)]);
    }
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", grace);
    std::string out = silent.empty() ? "every other process answered: a tower of some process never started its "
                                       "part, or the network or the collective library (MPI, NCCL) stalls"
                                     : silent + " did not answer within " + seconds + " s: hung, died (the "
                                       "launcher's messages name a process that died), or busy outside MPI";
    if (!unasked.empty()) out += "; " + unasked + " could not be asked (MPI_Isend failed)";
    if (stalled_ > timeout_s_ / 2) {  // not a long reduction inside MPI_Test: a large part of the timeout
      std::snprintf(seconds, sizeof seconds, "%.1f", stalled_);
      out += std::string("; this process itself did not run for ") + seconds + " s while it waited (suspended, or "
             "starved of CPU): it may be the one the others waited for";
    }
    if (!other.empty())  // MPI matches collectives in order: a bug of ours
      out += "; the processes' collectives differ (this one is at its collective " + std::to_string(entered_) +
             ", " + other + ")";
    return laggards_ = out;
  }

  void check(int code, const std::string& what) {
    if (code != MPI_SUCCESS) fail(what, "failed: " + mpi_text(code));
  }

  [[noreturn]] void fail(const std::string& what, const std::string& cause) {
    failed_ = true;
    throw InternalError("MPI " + what + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                        (host_.empty() ? "" : " (host " + host_ + ")") + " " + cause);
  }

  double timeout_s_;
  bool owns_mpi_ = false, failed_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  std::vector<std::string> hosts_;      ///< Every rank's host.
  MPI_Comm probe_ = MPI_COMM_NULL;      ///< For laggards' messages, apart from the collectives'.
  long long entered_ = 0;               ///< Collectives this process has started (each part of a large one).
  long long probe_entered_ = 0;         ///< entered_ as laggards() sent it.
  double stalled_ = 0;                  ///< wait_for's longest time between two polls, in seconds.
  std::string laggards_;                ///< laggards()'s text, once asked.
  /// One MPI call at a time (MPI_THREAD_SERIALIZED): a tower's NCCL timeout may ask unanswered() while
  /// another thread is in a collective.
  std::timed_mutex mu_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_mpi_process_group(double timeout_s) {
  if (!(timeout_s > 0)) throw InternalError("MPI process group: the timeout must be positive");
  return std::make_unique<MpiProcessGroup>(timeout_s);
}

bool mpi_built() { return true; }

}  // namespace trainer
