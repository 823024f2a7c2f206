#include "dist/device_plan.h"

#include <cctype>

#include "core/error.h"

namespace trainer {

std::string DevicePlan::describe() const {
  if (cpu_towers) return std::to_string(cpu_towers) + (cpu_towers == 1 ? " CPU tower" : " CPU towers");
  std::string s = gpus.size() == 1 ? "GPU " : "GPUs ";
  for (size_t i = 0; i < gpus.size(); ++i) s += (i ? ", " : "") + std::to_string(gpus[i]);
  return s;
}

bool DevicePlan::gpus_distinct() const {
  for (size_t i = 0; i < gpus.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (gpus[i] == gpus[j]) return false;
  return true;
}

static std::string list_found(const std::vector<GpuInfo>& gpus) {
  if (gpus.empty()) return "no GPU was found";
  std::string s = "GPUs found:";
  for (const auto& g : gpus)
    s += " " + std::to_string(g.index) + " (" + g.name + ", " +
         std::to_string(g.memory_bytes >> 30) + " GiB)";
  return s;
}

static bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 4) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

namespace {

/// plan_devices without gpu_ids.
DevicePlan plan_indices(const std::string& spec, const std::vector<GpuInfo>& gpus, bool cuda_training,
                        int local_rank, int local_size) {
  const std::string usage = "; use --gpus all, local, a list of GPU indices such as 0,2,5, cpu, or cpu:N";
  DevicePlan plan;
  const std::string process = local_size > 1 ? "process " + std::to_string(local_rank) + " of this host's " +
                                                   std::to_string(local_size) + ": "
                                             : "";
  if (spec == "local") {
    if (gpus.empty() || !cuda_training) {  // an explicit request for a GPU: no quiet fall back to the CPU
      throw UserError("--gpus local: " + process +
                      (gpus.empty() ? std::string("no GPU was found")
                                    : list_found(gpus) + ", but this build has no CUDA backend") +
                      "; use --gpus cpu for CPU towers");
    } else if (gpus.size() == 1) {  // alone, or the launcher bound one GPU to each process (srun --gpus-per-task=1)
      plan.gpus.push_back(gpus[0].index);
    } else if (local_rank >= int(gpus.size())) {
      throw UserError("--gpus local: " + process + "there is no GPU " + std::to_string(local_rank) + " for it; " +
                      list_found(gpus) + ": start at most " + std::to_string(gpus.size()) +
                      " processes per host (mpirun -H host:N) or use --gpus cpu");
    } else {
      plan.gpus.push_back(gpus[size_t(local_rank)].index);
    }
    return plan;
  }
  if (spec == "cpu") {
    plan.cpu_towers = 1;
    return plan;
  }
  if (spec.rfind("cpu:", 0) == 0) {
    std::string n = spec.substr(4);
    if (!all_digits(n) || std::stoi(n) < 1 || std::stoi(n) > 64)
      throw UserError("--gpus " + spec + ": N in cpu:N must be a whole number from 1 to 64" + usage);
    plan.cpu_towers = std::stoi(n);
    return plan;
  }
  if (spec == "all") {
    if (gpus.empty()) {
      plan.warnings.push_back("--gpus all: no GPU found; running on the CPU (one tower)");
      plan.cpu_towers = 1;
    } else if (!cuda_training) {
      plan.warnings.push_back("--gpus all: " + list_found(gpus) +
                              ", but this build has no CUDA backend (configured without CUDA); running on the CPU");
      plan.cpu_towers = 1;
    } else if (local_size > int(gpus.size())) {
      throw UserError("--gpus all: " + process + "this host's " + std::to_string(gpus.size()) +
                      " GPU(s) cannot be split among its " + std::to_string(local_size) +
                      " processes; start at most one process per GPU (mpirun -H host:N)");
    } else {  // the host's GPUs in contiguous blocks, one per process of the host
      const size_t n = gpus.size(), lo = n * size_t(local_rank) / size_t(local_size),
                   hi = n * size_t(local_rank + 1) / size_t(local_size);
      for (size_t i = lo; i < hi; ++i) plan.gpus.push_back(gpus[i].index);
    }
    return plan;
  }
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(start, end - start);
    if (!all_digits(item)) throw UserError("--gpus '" + spec + "': '" + item + "' is not a GPU index" + usage);
    plan.gpus.push_back(std::stoi(item));
    start = end + 1;
  }
  // Before the existence check: a build without CUDA sees no GPU at all.
  if (!cuda_training)
    throw UserError("--gpus " + spec +
                    ": this build has no CUDA training backend (configured without CUDA); use --gpus cpu or cpu:N");
  for (int idx : plan.gpus) {
    bool found = false;
    for (const auto& g : gpus) found |= g.index == idx;
    if (!found)
      throw UserError("--gpus " + spec + ": there is no GPU " + std::to_string(idx) + "; " + list_found(gpus) +
                      " (CUDA_VISIBLE_DEVICES is honoured). --gpus takes GPU indices, not a count: --gpus all "
                      "uses every GPU, --gpus cpu the CPU");
  }
  return plan;
}

}  // namespace

DevicePlan plan_devices(const std::string& spec, const std::vector<GpuInfo>& gpus, bool cuda_training,
                        int local_rank, int local_size) {
  DevicePlan plan = plan_indices(spec, gpus, cuda_training, local_rank, local_size);
  for (int idx : plan.gpus)
    for (const GpuInfo& g : gpus)
      if (g.index == idx) plan.gpu_ids.push_back(g.uuid);
  return plan;
}

}  // namespace trainer
