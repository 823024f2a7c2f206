#pragma once
// TowerDevices: the devices of a run's towers, made from a DevicePlan (--gpus):
// one Device per tower, the CUDA context of each GPU tower (owned here: its
// streams, cuDNN handle and caching allocator), and the communicators:
//   comm()       sums gradients and BN statistics and broadcasts weights, on
//                the towers' own memory: NCCL when there are two or more GPU
//                towers on distinct GPUs (NCCL forbids two ranks on one GPU;
//                under the tests' NCCL stand-in, towers sharing one too),
//                else the in-process LocalCommunicator (CPU towers, one GPU
//                tower, or towers sharing a GPU as with --gpus 0,0); CPU
//                towers of one process take the AsyncCommunicator instead
//                when the environment sets TRAINER_TEST_ASYNC_COMM (tests);
//   host_comm()  sums host values (loss and metric counts) among the towers'
//                threads, so reading them never waits for a device.
// In a run of several processes (an MPI launch, dist/process_group.h) the
// towers of every process form one world: GPU towers reduce through one NCCL
// communicator over all of them (also when the launcher started one process), CPU towers through the in-process
// communicator and then MPI (dist/world_communicator.h), and host_comm() sums
// over every process's towers too.
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "dist/communicator.h"
#include "dist/device_plan.h"
#include "dist/local_communicator.h"
#include "dist/process_group.h"

namespace trainer {

class TowerDevices {
 public:
  /// Creates the contexts (InternalError when a GPU cannot be initialised) and
  /// the communicators; collective_timeout_s bounds how long a GPU collective
  /// may take before the run is ended with an error. world: the run's
  /// processes (nullptr: this process alone), outliving this object; every
  /// process passes its own plan. UserError when some processes plan GPU
  /// towers and others CPU towers.
  TowerDevices(const DevicePlan& plan, Precision precision, double collective_timeout_s,
               ProcessGroup* world = nullptr);
  ~TowerDevices();
  TowerDevices(const TowerDevices&) = delete;
  TowerDevices& operator=(const TowerDevices&) = delete;

  /// This process's towers.
  int size() const { return int(devices_.size()); }
  /// Towers of every process, and the world index of this process's first
  /// (tower r here is world tower first_tower() + r); size() and 0 alone.
  int world_size() const { return world_size_; }
  int first_tower() const { return first_tower_; }
  const Device& device(int rank) const { return devices_[size_t(rank)]; }
  bool any_gpu() const { return !contexts_.empty(); }
  Communicator& comm() { return *comm_; }
  const Communicator& comm() const { return *comm_; }
  Communicator& host_comm() { return *host_comm_; }
  /// Binds the calling thread to rank's GPU (nothing for a CPU tower).
  void bind_thread(int rank) const;
  /// Wakes every tower blocked in a host collective with reason (a tower failed).
  void abort(const std::string& reason);
  /// "NCCL", "in-process" (how comm() reduces), for the log.
  const std::string& reduction() const { return reduction_; }

 private:
  std::vector<std::unique_ptr<DeviceContext>> contexts_;
  std::vector<Device> devices_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Communicator> host_comm_;
  int world_size_ = 0, first_tower_ = 0;
  std::string reduction_;
};

}  // namespace trainer
