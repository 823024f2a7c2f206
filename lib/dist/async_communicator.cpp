#include "dist/async_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/error.h"

namespace trainer {

std::optional<AsyncCommOptions> async_comm_from_env() {
  const char* text = std::getenv("TRAINER_TEST_ASYNC_COMM");
  if (!text || !*text) return std::nullopt;
  std::istringstream in(text);
  AsyncCommOptions o;
  char comma = 0;
  const bool ok = (in >> o.max_delay_us) && o.max_delay_us >= 0 && o.max_delay_us <= 1e6 &&
                  (in.eof() || ((in >> comma) && comma == ',' && (in >> o.seed) && in.eof()));
  if (!ok)
    throw UserError(std::string("TRAINER_TEST_ASYNC_COMM='") + text +
                    "': expected '<max delay in microseconds, 0 to 1000000>[,<seed>]', e.g. '200' or '200,7'");
  return o;
}

namespace {

/// "all_reduce_sum of 5 floats" or "broadcast of 3 floats from rank 0".
template <class Call>
std::string describe(const Call& c) {
  std::string s = std::string(c.op) + " of " + std::to_string(c.n) + " " + c.type + (c.n == 1 ? "" : "s");
  if (c.root >= 0) s += " from rank " + std::to_string(c.root);
  return s;
}

/// Sums the ranks' n values in rank order into sum, then hands it to every rank.
template <typename T>
void sum_into_all(const std::vector<void*>& data, size_t n, T* sum) {
  std::memcpy(sum, data[0], n * sizeof(T));
  for (size_t r = 1; r < data.size(); ++r) {
    const T* x = static_cast<const T*>(data[r]);
    for (size_t i = 0; i < n; ++i) sum[i] += x[i];
  }
  for (void* d : data) std::memcpy(d, sum, n * sizeof(T));
}

}  // namespace

AsyncCommunicator::AsyncCommunicator(int size, AsyncCommOptions options)
    : size_(size), options_(options), tickets_(size_t(std::max(size, 0))), history_(size_t(std::max(size, 0))) {
  if (size < 1) throw InternalError("AsyncCommunicator of " + std::to_string(size) + " ranks");
  for (int k = 0; k < 2; ++k) {
    lanes_[k].queued.assign(size_t(size), 0);
    lanes_[k].delays.seed(options.seed + uint64_t(k));
  }
  for (Lane& lane : lanes_) lane.helper = std::thread([this, &lane] { run(lane); });
}

AsyncCommunicator::~AsyncCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (Lane& lane : lanes_) lane.helper.join();
}

void AsyncCommunicator::check_rank(int rank) const {
  if (rank < 0 || rank >= size_)
    throw InternalError("AsyncCommunicator: rank " + std::to_string(rank) + " of " + std::to_string(size_));
}

void AsyncCommunicator::throw_aborted(int rank) const {
  throw InternalError("collectives of rank " + std::to_string(rank) + " aborted: " + reason_);
}

void AsyncCommunicator::abort_locked(const std::string& reason) {
  if (!aborted_) reason_ = reason;
  aborted_ = true;
  cv_.notify_all();
}

void AsyncCommunicator::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  abort_locked(reason);
}

uint64_t AsyncCommunicator::enqueue(int rank, int lane, const Call& call, char letter) {
  check_rank(rank);
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) throw_aborted(rank);
  Lane& l = lanes_[lane];
  // The two kinds interleaved alike on every rank, as NCCL_LAUNCH_ORDER_IMPLICIT needs of two communicators.
  const size_t k = history_[size_t(rank)].size();
  for (int r = 0; r < size_; ++r) {
    const std::string& other = history_[size_t(r)];
    if (r == rank || other.size() <= k || (other[k] == 's') == (letter == 's')) continue;
    abort_locked("call " + std::to_string(k) + " is " + (letter == 's' ? "a started reduction" : "a collective") +
                 " on rank " + std::to_string(rank) + " and " + (other[k] == 's' ? "a started reduction" : "a collective") +
                 " on rank " + std::to_string(r) + " (every rank must interleave the two kinds alike)");
    throw_aborted(rank);
  }
  history_[size_t(rank)] += letter;
  const uint64_t seq = l.queued[size_t(rank)]++;
  while (l.pending.size() <= seq - l.completed) l.pending.emplace_back();
  Collective& c = l.pending[seq - l.completed];
  if (c.calls.empty()) c.calls.resize(size_t(size_));
  for (int r = 0; r < size_; ++r) {
    const Call& other = c.calls[size_t(r)];
    if (*other.op == '\0') continue;  // rank r has not queued it yet
    if (std::strcmp(other.op, call.op) != 0 || std::strcmp(other.type, call.type) != 0 || other.n != call.n ||
        other.root != call.root) {
      abort_locked("collective " + std::to_string(seq) + (lane == kStarted ? " started" : "") +
                   " differs between ranks: rank " + std::to_string(r) + " called " + describe(other) + ", rank " +
                   std::to_string(rank) + " " + describe(call) +
                   " (every rank must call the same collectives in the same order)");
      throw_aborted(rank);
    }
    break;  // the arrived ones agree with each other
  }
  c.calls[size_t(rank)] = call;
  if (++c.arrived == size_) cv_.notify_all();
  return seq;
}

void AsyncCommunicator::wait_for(int rank, int lane, uint64_t seq) {
  std::unique_lock<std::mutex> lock(mu_);
  const Lane& l = lanes_[lane];
  // Once aborted, not while a helper still writes into the ranks' buffers: the caller may free them.
  cv_.wait(lock, [&] {
    return l.completed > seq || (aborted_ && !lanes_[kStarted].executing && !lanes_[kNow].executing);
  });
  if (l.completed <= seq) throw_aborted(rank);
}

void AsyncCommunicator::run(Lane& l) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || (!aborted_ && !l.pending.empty() && l.pending.front().arrived == size_); });
    if (stopping_) return;
    const double delay = std::uniform_real_distribution<double>(0.0, options_.max_delay_us)(l.delays);
    const Collective& c = l.pending.front();  // no rank changes it now; a deque keeps it in place as others queue
    lock.unlock();
    if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(delay));
    lock.lock();
    if (aborted_ || stopping_) continue;  // the ranks have stopped waiting: their buffers may be gone
    l.executing = true;
    lock.unlock();
    execute(l, c);
    lock.lock();
    l.executing = false;
    l.pending.pop_front();
    ++l.completed;
    cv_.notify_all();
  }
}

void AsyncCommunicator::execute(Lane& l, const Collective& c) {
  const Call& first = c.calls[0];
  std::vector<void*> data;
  for (const Call& call : c.calls) data.push_back(call.data);
  if (std::strcmp(first.op, "broadcast") == 0) {
    for (int r = 0; r < size_; ++r)
      if (r != first.root) std::memcpy(data[size_t(r)], data[size_t(first.root)], first.n * sizeof(float));
    return;
  }
  const bool is_double = std::strcmp(first.type, "double") == 0;
  l.scratch.resize(first.n * (is_double ? sizeof(double) : sizeof(float)));
  if (is_double) sum_into_all(data, first.n, reinterpret_cast<double*>(l.scratch.data()));
  else sum_into_all(data, first.n, reinterpret_cast<float*>(l.scratch.data()));
}

void AsyncCommunicator::all_reduce_sum(int rank, float* data, size_t n) {
  wait_for(rank, kNow, enqueue(rank, kNow, Call{"all_reduce_sum", "float", data, n, -1}, 'r'));
}

void AsyncCommunicator::all_reduce_sum(int rank, double* data, size_t n) {
  wait_for(rank, kNow, enqueue(rank, kNow, Call{"all_reduce_sum", "double", data, n, -1}, 'r'));
}

void AsyncCommunicator::broadcast(int rank, float* data, size_t n, int root) {
  if (root < 0 || root >= size_)
    throw InternalError("AsyncCommunicator: broadcast from rank " + std::to_string(root) + " of " +
                        std::to_string(size_));
  wait_for(rank, kNow, enqueue(rank, kNow, Call{"broadcast", "float", data, n, root}, 'b'));
}

int AsyncCommunicator::start_all_reduce_sum(int rank, float* data, size_t n) {
  const uint64_t seq = enqueue(rank, kStarted, Call{"all_reduce_sum", "float", data, n, -1}, 's');
  std::vector<uint64_t>& t = tickets_[size_t(rank)];  // the rank's own thread alone touches its tickets
  t.push_back(seq);
  return int(t.size()) - 1;
}

void AsyncCommunicator::wait(int rank, int ticket) {
  check_rank(rank);
  const std::vector<uint64_t>& t = tickets_[size_t(rank)];
  if (ticket < 0 || size_t(ticket) >= t.size())
    throw InternalError("AsyncCommunicator: rank " + std::to_string(rank) + " waits for ticket " +
                        std::to_string(ticket) + " of " + std::to_string(t.size()) + " started");
  wait_for(rank, kStarted, t[size_t(ticket)]);
}

void AsyncCommunicator::drain(int rank, int lane) {
  uint64_t queued = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued = lanes_[lane].queued[size_t(rank)];
  }
  if (queued > 0) wait_for(rank, lane, queued - 1);
}

void AsyncCommunicator::synchronize(int rank) {
  check_rank(rank);
  drain(rank, kStarted);
  drain(rank, kNow);
}

std::string AsyncCommunicator::history(int rank) const {
  check_rank(rank);
  std::lock_guard<std::mutex> lock(mu_);
  return history_[size_t(rank)];
}

void AsyncCommunicator::wait_all(int rank) {
  synchronize(rank);
  tickets_[size_t(rank)].clear();
}

}  // namespace trainer
