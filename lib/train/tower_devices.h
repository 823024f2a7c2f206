#pragma once
// TowerDevices: the devices of a run's towers, made from a DevicePlan (--gpus):
// one Device per tower, the CUDA context of each GPU tower (owned here: its
// streams, cuDNN handle and caching allocator), and the communicators:
//   comm()       sums gradients and BN statistics and broadcasts weights, on
//                the towers' own memory: NCCL when there are two or more GPU
//                towers on distinct GPUs (NCCL forbids two ranks on one GPU),
//                else the in-process LocalCommunicator (CPU towers, one GPU
//                tower, or towers sharing a GPU as with --gpus 0,0);
//   host_comm()  sums host values (loss and metric counts) among the towers'
//                threads, so reading them never waits for a device.
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "dist/communicator.h"
#include "dist/device_plan.h"
#include "dist/local_communicator.h"

namespace trainer {

class TowerDevices {
 public:
  /// Creates the contexts (InternalError when a GPU cannot be initialised) and
  /// the communicators; collective_timeout_s bounds how long a GPU collective
  /// may take before the run is ended with an error.
  TowerDevices(const DevicePlan& plan, Precision precision, double collective_timeout_s);
  ~TowerDevices();
  TowerDevices(const TowerDevices&) = delete;
  TowerDevices& operator=(const TowerDevices&) = delete;

  int size() const { return int(devices_.size()); }
  const Device& device(int rank) const { return devices_[size_t(rank)]; }
  bool any_gpu() const { return !contexts_.empty(); }
  Communicator& comm() { return *comm_; }
  LocalCommunicator& host_comm() { return host_comm_; }
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
  LocalCommunicator* local_ = nullptr;  ///< comm_ when it is in-process.
  LocalCommunicator host_comm_;
  std::string reduction_;
};

}  // namespace trainer
