// NcclCommunicator: dist/nccl_communicator.h's Communicator of GPU towers on
// distinct GPUs of this process, one NCCL rank per tower.
//
// Lanes: each rank has two NCCL communicators, each on its own stream of the
// tower's CudaContext. The buckets lane (comm_stream) carries the gradient
// buckets' all-reduces (start_all_reduce_sum); the urgent lane
// (urgent_comm_stream, the GPU's highest stream priority) carries the
// collectives the compute stream waits for at once (all_reduce_sum: the
// synchronized BatchNormalization's sums; broadcast). On one stream a BN layer's
// few kilobytes would wait behind every bucket already queued (tens of MB each)
// and backward would stall there: overlap would turn into serialisation.
// NCCL's guide warns that communicators used at once can deadlock: when their
// kernels cannot all be resident on a GPU, or when a call that synchronizes
// the device waits for one communicator's kernel that waits for a peer held
// up behind it. Here every rank issues each lane's collectives in the same
// order, and (Trainer) both lanes' collectives interleaved in the same order
// too; the urgent lane's kernels take at most 2 CTAs (channels), so both fit
// beside each other; and the one device-synchronizing work NCCL does after
// initialisation, setting up connections for a new message size, falls in
// the first step of each batch size, whose buckets start only once backward
// has ended (no urgent collective runs beside them). NCCL_LAUNCH_ORDER_IMPLICIT
// is left as the environment sets it: with 1, NCCL launches the lanes' kernels
// of a GPU in host order, which every rank keeps alike, but a BN layer's sums
// then wait for every bucket queued before them to start, all but the last
// having finished: the serialisation the urgent lane exists to avoid.
//
// Creation: the constructing thread creates every rank's communicators, one
// NCCL group per lane (ncclGetUniqueId, then ncclCommInitRankConfig per GPU
// between ncclGroupStart and ncclGroupEnd: the single-thread, several-GPU form
// that ncclCommInitAll uses inside), with config.blocking = 0; the urgent
// lane's reductions are small, so it gets at most 2 CTAs (channels), which
// also bounds the buffers NCCL allocates for it. Non-blocking
// communicators never block the host: NCCL work that would (initialisation,
// the connection set-up of a rank's first collective, finalisation) returns
// ncclInProgress and goes on in NCCL's threads while this class polls
// ncclCommGetAsyncError against its timeout and its abort flag. A blocking
// communicator could keep a tower inside NCCL forever, waiting for a peer whose
// tower failed, where no timeout of ours can reach it. Afterwards each tower's
// host thread issues its own rank's calls (NCCL allows one thread per
// communicator when every rank issues the same collectives in the same order).
//
// Ordering (as llm.c overlaps its gradient all-reduce with backward): an event
// recorded on the compute stream is waited for by the lane's stream before the
// collective; an event recorded on the lane's stream after it is waited for by
// the compute stream: at once for all_reduce_sum and
// broadcast, at wait()/wait_all() for start_all_reduce_sum. Events come from a
// pool made per rank at construction (the ticket pool grows only when a step
// starts more reductions than ever before), so a step creates none.
//
// Failure: the newest collective of each lane of a rank is the one to watch
// (a lane's stream runs in order). wait() and wait_all() look at them once
// (cudaEventQuery; while it runs, ncclCommGetAsyncError and its age);
// synchronize() polls the event every 50 us and NCCL's state and the clock
// every 1 ms until they complete. An NCCL or CUDA error, or a collective still
// running timeout_seconds after it was queued, aborts every rank's communicators
// (ncclCommAbort: NCCL kernels waiting for a peer quit) and throws. A mutex
// per rank, which the rank's calls take shared and abort takes exclusively,
// keeps ncclCommAbort from running during another thread's call on the rank's
// communicators (NCCL allows one thread at a time per communicator); the
// aborted flag is set before any ncclCommAbort, so the other towers' next
// calls throw at once instead of waiting for the aborts to end. An
// ncclCommAbort that hangs still holds up the thread that aborts (and the
// step, which waits for every tower's thread).
#include <dlfcn.h>
#include <nccl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

#include "backend/cuda/cuda_context.h"
#include "core/error.h"
#include "dist/nccl_communicator.h"

namespace trainer::cuda {
namespace {

using Clock = std::chrono::steady_clock;

/// Ticket events made per rank at construction.
constexpr int kInitialTickets = 32;

/// A rank's two communicators (see the top of this file).
enum Lane { kBuckets = 0, kUrgent = 1, kLanes = 2 };
constexpr const char* kLaneNames[kLanes] = {"trainer gradient buckets", "trainer urgent collectives"};
/// CTAs (channels) of the urgent lane: its all-reduces are a few kilobytes.
constexpr int kUrgentCtas = 2;

/// A collective as error messages name it.
struct Op {
  const char* name = "";  ///< "all_reduce_sum" or "broadcast".
  const char* type = "";  ///< Element type: "float" or "double".
  size_t count = 0;       ///< Elements.
  int root = -1;          ///< Broadcast root; -1 otherwise.
};

/// "all_reduce_sum of 1024 floats", "broadcast of 3 floats from rank 0".
std::string describe(const Op& op) {
  std::string s = std::string(op.name) + " of " + std::to_string(op.count) + " " + op.type + (op.count == 1 ? "" : "s");
  if (op.root >= 0) s += " from rank " + std::to_string(op.root);
  return s;
}

/// Seconds as the user gave them ("300", "0.5").
std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// While waiting for NCCL's threads: yield for the first millisecond, then sleep 1 ms per round.
void backoff(Clock::time_point since) {
  if (Clock::now() - since < std::chrono::milliseconds(1)) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

/// Not an error: done, or still going on in NCCL's threads.
bool running_or_done(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }

/// NCCL's name for r, with NCCL's last error message when it has one.
std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += " (" + std::string(last) + ")";
  return s;
}

/// Restores the calling thread's current CUDA device on scope exit.
class DeviceGuard {
 public:
  DeviceGuard() { saved_ = cudaGetDevice(&device_) == cudaSuccess; }
  ~DeviceGuard() {
    if (saved_) (void)cudaSetDevice(device_);  // best effort on the way out
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_ = 0;
  bool saved_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const std::vector<Device>& devices, double timeout_seconds, const NcclWorld& world);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int size() const override { return int(ranks_.size()); }
  void all_reduce_sum(int rank, float* data, size_t n) override { reduce_now(rank, data, n, ncclFloat, "float"); }
  void all_reduce_sum(int rank, double* data, size_t n) override { reduce_now(rank, data, n, ncclDouble, "double"); }
  void broadcast(int rank, float* data, size_t n, int root) override;
  int start_all_reduce_sum(int rank, float* data, size_t n) override;
  void wait(int rank, int ticket) override;
  void wait_all(int rank) override;
  void synchronize(int rank) override;
  void abort(const std::string& reason) override;

 private:
  /// One communicator of a rank and its newest collective.
  struct Channel {
    ncclComm_t comm = nullptr;   ///< Null once aborted or destroyed.
    cudaEvent_t last = nullptr;  ///< After the newest collective; null once it completed.
    Op last_op;
    Clock::time_point last_queued;
  };
  struct Rank {
    Device device;
    CudaContext* ctx = nullptr;
    std::array<Channel, kLanes> lanes;
    cudaEvent_t produced = nullptr;     ///< On the compute stream before a collective.
    cudaEvent_t reduced = nullptr;      ///< On the urgent stream after all_reduce_sum/broadcast.
    std::vector<cudaEvent_t> tickets;   ///< On the buckets stream after started reductions.
    int next_ticket = 0;
    /// Shared: the rank's thread in an NCCL call on its communicators. Exclusive: abort() on them. One per
    /// rank, so that a tower waits only for its own rank's abort, not for every rank's.
    std::shared_mutex mu;
    cudaStream_t stream(Lane lane) const { return lane == kBuckets ? ctx->comm_stream() : ctx->urgent_comm_stream(); }
  };

  /// Checks rank, throws if aborted, makes the rank's GPU current.
  Rank& enter(int rank);
  cudaEvent_t make_event(Rank& r);
  template <typename T>
  void reduce_now(int rank, T* data, size_t n, ncclDataType_t type, const char* type_name);
  /// Queues issue(comm, stream) of lane after the compute stream's work, then records done after it.
  template <typename Issue>
  void queue(int rank, Lane lane, const Op& op, cudaEvent_t done, Issue issue);
  /// ncclCommGetAsyncError of rank's lane; throws if the communicator was aborted.
  ncclResult_t async_state(int rank, Lane lane);
  /// Polls until NCCL has queued the call that returned ncclInProgress; returns its result.
  ncclResult_t settle(int rank, Lane lane, const Op& op, Clock::time_point since);
  /// Looks at (block: waits for) the newest collective of each of the rank's lanes; throws on failure.
  void check(int rank, bool block);
  /// check() for one lane.
  void check_lane(int rank, Lane lane, bool block);
  [[noreturn]] void fail(int rank, const Op& op, const std::string& cause);
  [[noreturn]] void throw_aborted(int rank) const;
  /// Creates every rank's NCCL communicators; on failure aborts those made and throws.
  void create_comms();
  /// Creates every rank's communicator of lane from id (world ranks first.. of n); returns the cause of a
  /// failure, empty on success.
  std::string create_lane(Lane lane, const ncclUniqueId& id, int n, int first);
  /// Finalises every rank's communicators in one group; whether all finished cleanly within the timeout.
  bool finalize_all() noexcept;
  /// Finalises and destroys the communicators, or aborts them when a
  /// collective is unfinished or finalisation fails; destroys the events.
  void release() noexcept;
  /// Names the devices: "cuda:0, cuda:1".
  std::string devices_text() const;
  /// "timed out after 600 s<when>" and, in a run of several processes, the
  /// ones that do not answer (ProcessGroup::unanswered; up to 10 s more).
  std::string timed_out(const std::string& when) const;

  std::vector<Rank> ranks_;
  double timeout_;
  NcclWorld world_;  ///< Its place in a run of several processes (group null: this process alone).
  std::mutex abort_mu_;        ///< Held while abort() marks the communicator aborted.
  std::atomic<bool> aborted_{false};
  std::string reason_;         ///< Written once, before aborted_ becomes true.
};

NcclCommunicator::NcclCommunicator(const std::vector<Device>& devices, double timeout_seconds,
                                   const NcclWorld& world)
    : ranks_(devices.size()), timeout_(timeout_seconds), world_(world) {
  DeviceGuard guard;
  try {
    for (size_t i = 0; i < devices.size(); ++i) {
      Rank& r = ranks_[i];
      r.device = devices[i];
      r.ctx = &context(devices[i]);
      TRAINER_CUDA_CHECK(*r.ctx, cudaSetDevice(r.device.index));
      r.produced = make_event(r);
      r.reduced = make_event(r);
      for (int k = 0; k < kInitialTickets; ++k) r.tickets.push_back(make_event(r));
    }
    create_comms();
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  DeviceGuard guard;
  release();
}

std::string NcclCommunicator::devices_text() const {
  std::string s;
  for (const Rank& r : ranks_) s += (s.empty() ? "" : ", ") + r.device.str();
  return s;
}

cudaEvent_t NcclCommunicator::make_event(Rank& r) {
  cudaEvent_t e = nullptr;
  TRAINER_CUDA_CHECK(*r.ctx, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void NcclCommunicator::create_comms() {
  // In a run of several processes, process 0's ids for all (NCCL's rendezvous goes through it).
  const bool makes_id = !world_.group || world_.group->rank() == 0;
  const int n = world_.group ? world_.ranks : size(), first = world_.group ? world_.first_rank : 0;
  // The ids travel with process 0's result, so that a failure there ends every process at once (not after
  // the others' timeout).
  struct {
    ncclUniqueId id[kLanes];
    int result;
  } made{};
  made.result = int(ncclSuccess);
  for (int lane = 0; lane < kLanes && makes_id && made.result == int(ncclSuccess); ++lane)
    made.result = int(ncclGetUniqueId(&made.id[lane]));
  if (world_.group) world_.group->broadcast(&made, sizeof made, 0);
  if (made.result != int(ncclSuccess))
    throw InternalError("ncclGetUniqueId failed " + std::string(makes_id ? "" : "on process 0 ") + "for " +
                        devices_text() + ": " + nccl_text(ncclResult_t(made.result), nullptr));
  for (int lane = 0; lane < kLanes; ++lane) {
    const std::string cause = create_lane(Lane(lane), made.id[lane], n, first);
    if (cause.empty()) continue;
    abort("NCCL could not create its communicators");
    throw InternalError("NCCL initialisation of the " + std::string(kLaneNames[lane]) + " communicator for " +
                        devices_text() + " failed: " + cause);
  }
}

std::string NcclCommunicator::create_lane(Lane lane, const ncclUniqueId& id, int n, int first) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = kLaneNames[lane];
  if (lane == kUrgent) config.maxCTAs = kUrgentCtas;
  // Nothing may throw between ncclGroupStart and ncclGroupEnd (the group is thread state).
  std::string cause;
  ncclResult_t error = ncclGroupStart(), res = ncclSuccess;
  for (int i = 0; i < size() && running_or_done(error); ++i) {  // this process's ranks; n in the world
    const cudaError_t set = cudaSetDevice(ranks_[size_t(i)].device.index);
    if (set != cudaSuccess) {
      cause = "cudaSetDevice(" + std::to_string(ranks_[size_t(i)].device.index) + ") failed: " + status_string(set);
      break;
    }
    res = ncclCommInitRankConfig(&ranks_[size_t(i)].lanes[lane].comm, n, id, first + i, &config);
    if (!running_or_done(res)) error = res;
  }
  res = ncclGroupEnd();
  if (running_or_done(error)) error = res;
  const Clock::time_point since = Clock::now();
  for (Rank& r : ranks_) {
    while (cause.empty() && running_or_done(error) && r.lanes[lane].comm) {
      ncclResult_t state = ncclSuccess;
      res = ncclCommGetAsyncError(r.lanes[lane].comm, &state);
      if (res != ncclSuccess) state = res;
      if (state == ncclSuccess) break;
      if (state != ncclInProgress) error = state;
      else if (seconds_since(since) > timeout_) cause = timed_out("");
      else backoff(since);
    }
  }
  if (cause.empty() && !running_or_done(error)) cause = nccl_text(error, nullptr);
  return cause;
}

NcclCommunicator::Rank& NcclCommunicator::enter(int rank) {
  if (rank < 0 || rank >= size())
    throw InternalError("NCCL communicator: rank " + std::to_string(rank) + " of " + std::to_string(size()));
  if (aborted_.load(std::memory_order_acquire)) throw_aborted(rank);
  Rank& r = ranks_[size_t(rank)];
  TRAINER_CUDA_CHECK(*r.ctx, cudaSetDevice(r.device.index));
  return r;
}

void NcclCommunicator::throw_aborted(int rank) const {
  throw InternalError("NCCL collectives of rank " + std::to_string(rank) + " (" + ranks_[size_t(rank)].device.str() +
                      ") aborted: " + reason_);
}

std::string NcclCommunicator::timed_out(const std::string& when) const {
  const std::string who = world_.group ? world_.group->unanswered() : "";
  return "timed out after " + seconds_text(timeout_) + " s" + when + (who.empty() ? "" : ": " + who);
}

void NcclCommunicator::fail(int rank, const Op& op, const std::string& cause) {
  const std::string msg = "NCCL " + describe(op) + " on rank " + std::to_string(rank) + " (" +
                          ranks_[size_t(rank)].device.str() + ") " + cause;
  abort(msg);
  throw InternalError(msg);
}

ncclResult_t NcclCommunicator::async_state(int rank, Lane lane) {
  ncclResult_t state = ncclSuccess;
  {
    std::shared_lock<std::shared_mutex> lock(ranks_[size_t(rank)].mu);
    if (!aborted_.load(std::memory_order_acquire)) {
      const ncclResult_t res = ncclCommGetAsyncError(ranks_[size_t(rank)].lanes[lane].comm, &state);
      if (res != ncclSuccess) state = res;
    }
  }
  if (aborted_.load(std::memory_order_acquire)) throw_aborted(rank);
  return state;
}

ncclResult_t NcclCommunicator::settle(int rank, Lane lane, const Op& op, Clock::time_point since) {
  for (;;) {
    const ncclResult_t state = async_state(rank, lane);
    if (state != ncclInProgress) return state;
    if (seconds_since(since) > timeout_)
      fail(rank, op, timed_out(" while NCCL was queuing it"));
    backoff(since);
  }
}

template <typename Issue>
void NcclCommunicator::queue(int rank, Lane lane, const Op& op, cudaEvent_t done, Issue issue) {
  Rank& r = ranks_[size_t(rank)];
  Channel& c = r.lanes[lane];
  const cudaStream_t stream = r.stream(lane);
  TRAINER_CUDA_CHECK(*r.ctx, cudaEventRecord(r.produced, r.ctx->stream()));
  TRAINER_CUDA_CHECK(*r.ctx, cudaStreamWaitEvent(stream, r.produced, 0));
  const Clock::time_point queued = Clock::now();
  ncclResult_t res = ncclSuccess;
  std::string detail;
  {
    std::shared_lock<std::shared_mutex> lock(r.mu);
    if (!aborted_.load(std::memory_order_acquire)) {
      res = issue(c.comm, stream);
      if (!running_or_done(res)) detail = nccl_text(res, c.comm);
    }
  }
  if (aborted_.load(std::memory_order_acquire)) throw_aborted(rank);
  if (res == ncclInProgress) {
    res = settle(rank, lane, op, queued);
    if (res != ncclSuccess) {
      std::shared_lock<std::shared_mutex> lock(r.mu);
      detail = nccl_text(res, aborted_.load(std::memory_order_acquire) ? nullptr : c.comm);
    }
  }
  if (res != ncclSuccess) fail(rank, op, "failed: " + detail);
  TRAINER_CUDA_CHECK(*r.ctx, cudaEventRecord(done, stream));
  c.last = done;
  c.last_op = op;
  c.last_queued = queued;
}

template <typename T>
void NcclCommunicator::reduce_now(int rank, T* data, size_t n, ncclDataType_t type, const char* type_name) {
  Rank& r = enter(rank);
  queue(rank, kUrgent, Op{"all_reduce_sum", type_name, n, -1}, r.reduced, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclAllReduce(data, data, n, type, ncclSum, comm, s);
  });
  TRAINER_CUDA_CHECK(*r.ctx, cudaStreamWaitEvent(r.ctx->stream(), r.reduced, 0));
}

void NcclCommunicator::broadcast(int rank, float* data, size_t n, int root) {
  Rank& r = enter(rank);
  queue(rank, kUrgent, Op{"broadcast", "float", n, root}, r.reduced, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclBroadcast(data, data, n, ncclFloat, root, comm, s);
  });
  TRAINER_CUDA_CHECK(*r.ctx, cudaStreamWaitEvent(r.ctx->stream(), r.reduced, 0));
}

int NcclCommunicator::start_all_reduce_sum(int rank, float* data, size_t n) {
  Rank& r = enter(rank);
  const int ticket = r.next_ticket;
  if (size_t(ticket) == r.tickets.size()) r.tickets.push_back(make_event(r));
  queue(rank, kBuckets, Op{"all_reduce_sum", "float", n, -1}, r.tickets[size_t(ticket)], [&](ncclComm_t comm, cudaStream_t s) {
    return ncclAllReduce(data, data, n, ncclFloat, ncclSum, comm, s);
  });
  ++r.next_ticket;
  return ticket;
}

void NcclCommunicator::check(int rank, bool block) {
  for (int lane = 0; lane < kLanes; ++lane) check_lane(rank, Lane(lane), block);
}

void NcclCommunicator::check_lane(int rank, Lane lane, bool block) {
  Rank& r = ranks_[size_t(rank)];
  Channel& c = r.lanes[lane];
  Clock::time_point next_poll = Clock::now();
  while (c.last) {
    const cudaError_t q = cudaEventQuery(c.last);
    if (q == cudaSuccess) {
      c.last = nullptr;
      break;
    }
    if (q != cudaErrorNotReady) fail(rank, c.last_op, "failed on the device: cudaEventQuery: " + status_string(q));
    const Clock::time_point now = Clock::now();
    if (now >= next_poll) {
      const ncclResult_t state = async_state(rank, lane);
      if (!running_or_done(state)) {
        std::string detail;
        {
          std::shared_lock<std::shared_mutex> lock(r.mu);
          detail = nccl_text(state, aborted_.load(std::memory_order_acquire) ? nullptr : c.comm);
        }
        fail(rank, c.last_op, "failed: " + detail);
      }
      if (std::chrono::duration<double>(now - c.last_queued).count() > timeout_)
        fail(rank, c.last_op, timed_out(""));
      next_poll = now + std::chrono::milliseconds(1);
    }
    if (!block) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  // An abort makes NCCL kernels quit, so their events complete without a result.
  if (aborted_.load(std::memory_order_acquire)) throw_aborted(rank);
}

void NcclCommunicator::wait(int rank, int ticket) {
  Rank& r = enter(rank);
  if (ticket < 0 || ticket >= r.next_ticket)
    throw InternalError("NCCL communicator: rank " + std::to_string(rank) + " waits for ticket " +
                        std::to_string(ticket) + " of " + std::to_string(r.next_ticket) + " started");
  check(rank, false);
  TRAINER_CUDA_CHECK(*r.ctx, cudaStreamWaitEvent(r.ctx->stream(), r.tickets[size_t(ticket)], 0));
}

void NcclCommunicator::wait_all(int rank) {
  Rank& r = enter(rank);
  check(rank, false);
  if (const cudaEvent_t last = r.lanes[kBuckets].last)
    TRAINER_CUDA_CHECK(*r.ctx, cudaStreamWaitEvent(r.ctx->stream(), last, 0));
  r.next_ticket = 0;
}

void NcclCommunicator::synchronize(int rank) {
  enter(rank);
  check(rank, true);
}

void NcclCommunicator::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (aborted_.load(std::memory_order_acquire)) return;
    reason_ = reason;
    aborted_.store(true, std::memory_order_release);  // every rank's next call throws, without NCCL
  }
  DeviceGuard guard;
  for (Rank& r : ranks_) {
    std::unique_lock<std::shared_mutex> lock(r.mu);  // waits for this rank's call in NCCL only
    for (Channel& c : r.lanes) {
      if (!c.comm) continue;
      // Results ignored: this is the failure path already, and the handle is gone either way.
      (void)cudaSetDevice(r.device.index);
      (void)ncclCommAbort(c.comm);
      c.comm = nullptr;
    }
  }
}

bool NcclCommunicator::finalize_all() noexcept {
  // Non-blocking teardown: finalise every communicator in one group (the ranks synchronise with each
  // other), then poll until NCCL has finished.
  ncclResult_t error = ncclGroupStart();
  for (Rank& r : ranks_) {
    if (!running_or_done(error) || cudaSetDevice(r.device.index) != cudaSuccess) {
      error = ncclUnhandledCudaError;
      break;
    }
    for (Channel& c : r.lanes) {
      const ncclResult_t res = ncclCommFinalize(c.comm);
      if (!running_or_done(res)) error = res;
    }
  }
  const ncclResult_t end = ncclGroupEnd();
  if (running_or_done(error)) error = end;
  const Clock::time_point since = Clock::now();
  for (Rank& r : ranks_)
    for (Channel& c : r.lanes)
      while (running_or_done(error)) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t res = ncclCommGetAsyncError(c.comm, &state);
        if (res != ncclSuccess) state = res;
        if (state == ncclSuccess) break;
        if (state != ncclInProgress || seconds_since(since) > timeout_) error = ncclInternalError;
        else backoff(since);
      }
  return running_or_done(error);
}

void NcclCommunicator::release() noexcept {
  bool clean = !aborted_.load(std::memory_order_acquire) && !ranks_.empty();
  for (const Rank& r : ranks_)
    for (const Channel& c : r.lanes) clean = clean && c.comm && (!c.last || cudaEventQuery(c.last) == cudaSuccess);
  if (clean) clean = finalize_all();
  if (clean) {
    for (Rank& r : ranks_) {
      (void)cudaSetDevice(r.device.index);
      for (Channel& c : r.lanes) {
        (void)ncclCommDestroy(c.comm);  // finalised: frees local resources only
        c.comm = nullptr;
      }
    }
  } else {
    abort("the communicator was destroyed with collectives unfinished");
  }
  for (Rank& r : ranks_) {
    if (cudaSetDevice(r.device.index) != cudaSuccess) continue;
    if (r.produced) (void)cudaEventDestroy(r.produced);
    if (r.reduced) (void)cudaEventDestroy(r.reduced);
    for (cudaEvent_t e : r.tickets) (void)cudaEventDestroy(e);
    r.produced = r.reduced = nullptr;
    r.tickets.clear();
  }
}

}  // namespace
}  // namespace trainer::cuda

namespace trainer {

bool nccl_allows_shared_gpus() { return dlsym(RTLD_DEFAULT, "trainerNcclStandin") != nullptr; }

std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<Device>& devices, double timeout_seconds) {
  return make_nccl_communicator(devices, timeout_seconds, NcclWorld{});
}

std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<Device>& devices, double timeout_seconds,
                                                     const NcclWorld& world) {
  if (devices.empty()) throw InternalError("NCCL communicator: no devices");
  if (!(timeout_seconds > 0))
    throw InternalError("NCCL communicator: the timeout must be positive, got " + std::to_string(timeout_seconds));
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i].is_cuda() || !devices[i].ctx)
      throw InternalError("NCCL communicator: tower " + std::to_string(i) + " is on " + devices[i].str() +
                          ", not on a GPU with a device context");
    for (size_t j = 0; j < i && !nccl_allows_shared_gpus(); ++j)
      if (devices[j].index == devices[i].index)
        throw InternalError("NCCL communicator: towers " + std::to_string(j) + " and " + std::to_string(i) +
                            " share " + devices[i].str() +
                            "; NCCL needs one rank per GPU (towers sharing a GPU reduce through the in-process "
                            "communicator)");
  }
  if (world.group && (world.first_rank < 0 || world.first_rank + int(devices.size()) > world.ranks))
    throw InternalError("NCCL communicator: ranks " + std::to_string(world.first_rank) + ".." +
                        std::to_string(world.first_rank + int(devices.size()) - 1) + " of a world of " +
                        std::to_string(world.ranks));
  return std::make_unique<cuda::NcclCommunicator>(devices, timeout_seconds, world);
}

}  // namespace trainer
