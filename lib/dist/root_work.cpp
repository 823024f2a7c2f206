#include "dist/root_work.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

namespace trainer {

void run_on_root(ProcessGroup* world, const std::function<void()>& work) {
  if (!world || world->size() == 1) return work();
  const bool root = world->rank() == 0;
  std::atomic<bool> done{false};
  std::exception_ptr error;
  std::thread worker;
  if (root)
    worker = std::thread([&] {
      try {
        work();
      } catch (...) {
        error = std::current_exception();
      }
      done = true;
    });
  struct Joiner {  // a collective that throws still waits for the work, which uses this frame
    std::thread& t;
    ~Joiner() {
      if (t.joinable()) t.join();
    }
  } joiner{worker};
  for (;;) {
    double finished = 0;
    if (root) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(kRootHeartbeatSeconds);
      while (!done && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      finished = done ? 1 : 0;
    }
    world->all_reduce_max(&finished, 1);  // every process the same number of times: ends when rank 0's work has
    if (finished > 0) break;
  }
  if (worker.joinable()) worker.join();
  check_together(world, [&] {
    if (error) std::rethrow_exception(error);
  });
}

}  // namespace trainer
