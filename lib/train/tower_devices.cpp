#include "train/tower_devices.h"

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "backend/cpu_info.h"
#include "backend/gpu_info.h"
#include "core/error.h"
#include "dist/async_communicator.h"
#include "dist/nccl_communicator.h"
#include "dist/world_communicator.h"

namespace trainer {

TowerDevices::TowerDevices(const DevicePlan& plan, Precision precision, double collective_timeout_s,
                           ProcessGroup* world)
    : world_size_(plan.towers()) {
  const bool several = world && world->size() > 1;
  if (world) {
    // Each process's tower count, device kind (c: CPU, g: GPUs, s: GPUs of which some are shared) and GPUs' UUIDs,
    // so that every process knows where its towers sit in the world and all refuse a bad plan together.
    const char kind = plan.gpus.empty() ? 'c' : plan.gpus_distinct() ? 'g' : 's';
    std::string ids;
    for (const std::string& id : plan.gpu_ids) ids += " " + id;
    const Gathered all = gather(*world, std::to_string(plan.towers()) + kind + ids);
    struct Entry {
      int towers = 0;
      char kind = 'c';
      std::vector<std::string> ids;
    };
    std::vector<Entry> entries;
    for (size_t p = 0; p < all.all.size(); ++p) {
      std::istringstream in(all.text(p));
      std::string head, id;
      in >> head;
      entries.push_back({std::stoi(head), head.back(), {}});
      while (in >> id) entries.back().ids.push_back(id);
    }
    std::map<std::string, int> owner;  // GPU UUID -> the first process planning it
    world_size_ = 0;
    for (int p = 0; p < int(entries.size()); ++p) {
      const Entry& e = entries[size_t(p)];
      if (p == world->rank()) first_tower_ = world_size_;
      world_size_ += e.towers;
      // Every process finds these alike: printed once (throw_alike).
      if (e.kind == 's')
        throw_alike(world, "process " + std::to_string(p) + "'s towers share a GPU (--gpus with a repeated index): "
                           "under an MPI launch towers reduce through NCCL, which needs one GPU per tower; give each "
                           "process distinct GPUs (--gpus local, or all)");
      if ((e.kind == 'c') != (entries[0].kind == 'c'))
        throw_alike(world, "process " + std::to_string(p) + " plans " + (e.kind == 'c' ? "CPU" : "GPU") +
                               " towers and process 0 " + (e.kind == 'c' ? "GPU" : "CPU") +
                               " towers: every process of a run must train on the same kind of device (give each "
                               "the same --gpus, e.g. local or cpu)");
      for (const std::string& id : e.ids) {
        const auto [first, fresh] = owner.emplace(id, p);
        if (!fresh)
          throw_alike(world, all.process(size_t(first->second)) + " and " + all.process(size_t(p)) +
                                 " would both train on GPU " + id + ", and NCCL needs one GPU per tower: give "
                                 "each process of a host its own GPUs (--gpus local or all, which split the GPUs "
                                 "a process sees by its rank on the host; where each process sees one GPU only, "
                                 "its launcher must bind a different one to each, as srun --gpus-per-task=1 does), "
                                 "or start at most one process per GPU on each host (mpirun -H host:N)");
      }
    }
  }
  const Precision on_cpu = cpu_precision(precision);
  if (plan.cpu_towers > 0 && precision == Precision::BF16 && on_cpu != precision)
    spdlog::warn("training.precision bf16: this CPU has neither AVX512-BF16 nor AMX, so its towers compute in fp32");
  for (int r = 0; r < plan.cpu_towers; ++r) devices_.push_back(Device{DeviceKind::CPU, -1, nullptr, on_cpu});
  for (int gpu : plan.gpus) {
    contexts_.push_back(make_gpu_context(gpu, precision));
    devices_.push_back(Device{DeviceKind::CUDA, gpu, contexts_.back().get(), precision});
  }
  if (world && !plan.gpus.empty()) {  // also a world of one process: NCCL as the many-process run uses it
    comm_ = make_nccl_communicator(devices_, collective_timeout_s, NcclWorld{world, first_tower_, world_size_});
    reduction_ = "NCCL over " + std::to_string(world->size()) + (world->size() == 1 ? " process" : " processes");
  } else if (several) {
    comm_ = std::make_unique<WorldCommunicator>(std::make_unique<LocalCommunicator>(size(), devices_), *world);
    reduction_ = "in-process, then MPI over " + std::to_string(world->size()) + " processes";
  } else if (plan.gpus.size() >= 2 && (plan.gpus_distinct() || nccl_allows_shared_gpus())) {
    comm_ = make_nccl_communicator(devices_, collective_timeout_s);
    reduction_ = plan.gpus_distinct() ? "NCCL" : "NCCL (the tests' stand-in: towers share a GPU)";
  } else if (const auto async = plan.gpus.empty() ? async_comm_from_env() : std::nullopt) {
    comm_ = std::make_unique<AsyncCommunicator>(size(), *async);
    reduction_ = "in-process, asynchronous (TRAINER_TEST_ASYNC_COMM)";
  } else {
    comm_ = std::make_unique<LocalCommunicator>(size(), devices_);
    reduction_ = "in-process";
  }
  host_comm_ = std::make_unique<LocalCommunicator>(size());
  if (several) host_comm_ = std::make_unique<WorldCommunicator>(std::move(host_comm_), *world);
}

TowerDevices::~TowerDevices() {
  comm_.reset();  // before the contexts its streams belong to
}

void TowerDevices::bind_thread(int rank) const {
  const Device& d = device(rank);
  if (d.is_cuda()) d.ctx->make_current();
}

void TowerDevices::abort(const std::string& reason) {
  host_comm_->abort(reason);
  comm_->abort(reason);
}

}  // namespace trainer
