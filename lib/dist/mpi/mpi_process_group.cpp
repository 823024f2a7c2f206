// MpiProcessGroup: dist/mpi_process_group.h's ProcessGroup over MPI_COMM_WORLD.
//
// Collectives are the non-blocking forms (MPI_Iallreduce, MPI_Ibcast,
// MPI_Iallgather), completed by polling MPI_Test against the group's timeout:
// a blocking call would wait forever for a process that hangs. A collective
// that fails or times out marks the group failed; the destructor then skips
// MPI_Finalize (it would wait for the abandoned collective), the process ends
// with our error and exit code, and the launcher ends the others. Errors are
// returned (MPI_ERRORS_RETURN), not fatal, so that they carry our message.
// MPI's C API only: Open MPI's and MPICH's mpi.h otherwise pull in the removed C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

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

  void broadcast(void* data, size_t bytes, int root) override {
    const std::string what = "broadcast of " + std::to_string(bytes) + " bytes from rank " + std::to_string(root);
    for (size_t done = 0; done < bytes;) {  // MPI counts are int
      const int part = int(std::min<size_t>(bytes - done, size_t(1) << 30));
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Ibcast(static_cast<char*>(data) + done, part, MPI_BYTE, root, MPI_COMM_WORLD, &req), what);
      complete(req, what);
      done += size_t(part);
    }
  }

  std::vector<std::string> all_gather(const std::string& text) override {
    int mine = int(text.size());
    std::vector<int> lengths(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Iallgather(&mine, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD, &req), "all_gather (lengths)");
    complete(req, "all_gather (lengths)");
    int total = 0;
    for (int r = 0; r < size_; ++r) offsets[size_t(r)] = total, total += lengths[size_t(r)];
    std::string all(size_t(total), '\0');
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
    const std::string what = std::string(op == MPI_MAX ? "all_reduce_max" : "all_reduce_sum") + " of " +
                             std::to_string(n) + " " + type_name + (n == 1 ? "" : "s");
    int type_size = 0;
    MPI_Type_size(type, &type_size);
    for (size_t done = 0; done < n;) {  // MPI counts are int
      const int part = int(std::min<size_t>(n - done, size_t(1) << 30));
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + done * size_t(type_size), part, type, op,
                           MPI_COMM_WORLD, &req),
            what);
      complete(req, what);
      done += size_t(part);
    }
  }

  /// Polls req until it completes (yielding for the first millisecond, then sleeping 100 us a round):
  /// false when the timeout passes first or MPI_Test fails.
  bool wait_for(MPI_Request& req) {
    const Clock::time_point start = Clock::now();
    for (;;) {
      int done = 0;
      if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
      if (done) return true;
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
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
    fail(what, std::string("did not complete within ") + seconds +
                   " s (training.collective_timeout): another process died or hangs; the launcher's messages "
                   "name a process that died");
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
};

}  // namespace

std::unique_ptr<ProcessGroup> make_mpi_process_group(double timeout_s) {
  if (!(timeout_s > 0)) throw InternalError("MPI process group: the timeout must be positive");
  return std::make_unique<MpiProcessGroup>(timeout_s);
}

bool mpi_built() { return true; }

}  // namespace trainer
