#include "train/tower_devices.h"

#include "backend/gpu_info.h"
#include "dist/nccl_communicator.h"

namespace trainer {

TowerDevices::TowerDevices(const DevicePlan& plan, Precision precision, double collective_timeout_s)
    : host_comm_(plan.towers()) {
  for (int r = 0; r < plan.cpu_towers; ++r) devices_.push_back(Device{});
  for (int gpu : plan.gpus) {
    contexts_.push_back(make_gpu_context(gpu, precision));
    devices_.push_back(Device{DeviceKind::CUDA, gpu, contexts_.back().get()});
  }
  if (plan.gpus.size() >= 2 && plan.gpus_distinct()) {
    comm_ = make_nccl_communicator(devices_, collective_timeout_s);
    reduction_ = "NCCL";
  } else {
    auto local = std::make_unique<LocalCommunicator>(size(), devices_);
    local_ = local.get();
    comm_ = std::move(local);
    reduction_ = "in-process";
  }
}

TowerDevices::~TowerDevices() {
  comm_.reset();  // before the contexts its streams belong to
}

void TowerDevices::bind_thread(int rank) const {
  const Device& d = device(rank);
  if (d.is_cuda()) d.ctx->make_current();
}

void TowerDevices::abort(const std::string& reason) {
  host_comm_.abort(reason);
  if (local_) local_->abort(reason);
}

}  // namespace trainer
