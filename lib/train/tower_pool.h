#pragma once
// TowerPool: one persistent host thread per tower (replica), so towers compute
// in parallel and each keeps its own OpenMP team of threads_per_tower threads.
// With a single tower everything runs on the calling thread.
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace trainer {

class TowerPool {
 public:
  /// towers >= 1; threads_per_tower >= 1 (OpenMP threads each tower's ops use);
  /// on_error(rank, message) is called from the failing tower's thread before
  /// the others are waited for (it should abort the communicator).
  TowerPool(int towers, int threads_per_tower,
            std::function<void(int, const std::string&)> on_error);
  ~TowerPool();
  TowerPool(const TowerPool&) = delete;
  TowerPool& operator=(const TowerPool&) = delete;

  int size() const { return towers_; }
  /// Runs fn(rank) for every rank in parallel and waits for all. Rethrows the
  /// first exception a tower raised (after every tower has returned).
  void run(const std::function<void(int)>& fn);

 private:
  void worker(int rank);
  /// Keeps the first exception (call inside a catch block) and tells on_error_.
  void record_failure(int rank, const std::string& what);
  int towers_, threads_;
  std::function<void(int, const std::string&)> on_error_;
  std::vector<std::thread> threads_v_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(int)>* job_ = nullptr;
  unsigned long generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace trainer
