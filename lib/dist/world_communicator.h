#pragma once
// WorldCommunicator: the collectives of towers that are CPU threads of several
// processes (an MPI launch, dist/process_group.h). Each collective runs in two
// levels: the in-process communicator first (this process's towers, ranks 0..
// size() - 1, host memory), then tower 0's thread joins the processes' MPI
// collective on the result, then the in-process communicator hands it to the
// process's other towers. So a sum over W processes of T towers each is the sum
// of the processes' partial sums, the same on every tower; with one tower per
// process it is MPI_Allreduce of the towers' values.
//
// Broadcasts come from world tower 0 (the first tower of process 0); the only
// root the trainer uses. GPU towers of several processes reduce through one
// NCCL communicator over all of them instead (dist/nccl_communicator.h).
#include <memory>

#include "dist/communicator.h"
#include "dist/process_group.h"

namespace trainer {

class WorldCommunicator final : public Communicator {
 public:
  /// local: the collectives among this process's towers (CPU towers, host
  /// memory); group: the processes, outliving this communicator.
  WorldCommunicator(std::unique_ptr<Communicator> local, ProcessGroup& group);
  /// This process's towers (the ranks its callers pass).
  int size() const override { return local_->size(); }
  void all_reduce_sum(int rank, float* data, size_t n) override;
  void all_reduce_sum(int rank, double* data, size_t n) override;
  /// root must be 0: world tower 0. InternalError otherwise.
  void broadcast(int rank, float* data, size_t n, int root) override;
  void abort(const std::string& reason) override { local_->abort(reason); }

 private:
  template <typename T>
  void reduce(int rank, T* data, size_t n);
  std::unique_ptr<Communicator> local_;
  ProcessGroup& group_;
};

}  // namespace trainer
