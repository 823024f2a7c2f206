#include "train/tower_pool.h"

#include <omp.h>

#include <string>

namespace trainer {

TowerPool::TowerPool(int towers, int threads_per_tower,
                     std::function<void(int, const std::string&)> on_error)
    : towers_(towers), threads_(threads_per_tower), on_error_(std::move(on_error)) {
  if (towers_ == 1) {
    omp_set_num_threads(threads_);
    return;
  }
  for (int r = 0; r < towers_; ++r) threads_v_.emplace_back([this, r] { worker(r); });
}

TowerPool::~TowerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : threads_v_) t.join();
}

void TowerPool::run(const std::function<void(int)>& fn) {
  if (towers_ == 1) {
    fn(0);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  pending_ = towers_;
  error_ = nullptr;
  ++generation_;
  cv_start_.notify_all();
  cv_done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void TowerPool::record_failure(int rank, const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) error_ = std::current_exception();
  }
  on_error_(rank, what);
}

void TowerPool::worker(int rank) {
  omp_set_num_threads(threads_);
  unsigned long seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    try {
      (*job)(rank);
    } catch (const std::exception& e) {
      record_failure(rank, e.what());
    } catch (...) {
      record_failure(rank, "unknown exception");
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) cv_done_.notify_all();
  }
}

}  // namespace trainer
