#include "dist/world_communicator.h"

#include <algorithm>
#include <type_traits>

#include "core/error.h"

namespace trainer {

WorldCommunicator::WorldCommunicator(std::unique_ptr<Communicator> local, ProcessGroup& group)
    : local_(std::move(local)), group_(group) {}

template <typename T>
void WorldCommunicator::reduce(int rank, T* data, size_t n) {
  local_->all_reduce_sum(rank, data, n);
  if (rank == 0) group_.all_reduce_sum(data, n);
  // Tower 0's result to the others; also the barrier that keeps them from reading it early.
  if constexpr (std::is_same_v<T, float>) {
    local_->broadcast(rank, data, n, 0);
  } else {  // no double broadcast: the others start from zeros, so the sum is tower 0's values
    if (rank != 0) std::fill(data, data + n, T(0));
    local_->all_reduce_sum(rank, data, n);
  }
}

void WorldCommunicator::all_reduce_sum(int rank, float* data, size_t n) { reduce(rank, data, n); }
void WorldCommunicator::all_reduce_sum(int rank, double* data, size_t n) { reduce(rank, data, n); }

void WorldCommunicator::broadcast(int rank, float* data, size_t n, int root) {
  if (root != 0) throw InternalError("WorldCommunicator broadcasts from world tower 0 only, not " + std::to_string(root));
  local_->broadcast(rank, data, n, 0);
  if (rank == 0) group_.broadcast(data, n * sizeof(float), 0);
  local_->broadcast(rank, data, n, 0);
}

}  // namespace trainer
