#include "dist/device_plan.h"

#include <cctype>
#include <set>
#include <sstream>

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
                        const HostProcesses& host) {
  const int local_rank = host.rank, local_size = host.size;
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
    } else if (gpus.size() == 1 || host.own_gpus) {  // alone, or the launcher bound GPUs to each process
      for (const GpuInfo& g : gpus) plan.gpus.push_back(g.index);
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
    } else if (host.own_gpus) {  // the launcher bound these GPUs to this process
      for (const GpuInfo& g : gpus) plan.gpus.push_back(g.index);
    } else if (local_size > int(gpus.size())) {
      throw UserError("--gpus all: " + process + "this host's " + std::to_string(gpus.size()) +
                      " GPU(s) cannot be split among its " + std::to_string(local_size) +
                      " processes; start at most one process per GPU (mpirun -H host:N), or bind GPUs to "
                      "processes (srun --gpus-per-task=N)");
    } else {  // the host's GPUs in contiguous blocks, one per process of the host
      const size_t n = gpus.size(), lo = n * size_t(local_rank) / size_t(local_size),
                   hi = n * size_t(local_rank + 1) / size_t(local_size);
      for (size_t i = lo; i < hi; ++i) plan.gpus.push_back(gpus[i].index);
    }
    return plan;
  }
  std::string lower = spec;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (lower != spec && (lower == "all" || lower == "local" || lower == "cpu" || lower.rfind("cpu:", 0) == 0))
    throw UserError("--gpus '" + spec + "': did you mean '" + lower + "'? (the words are lower case)" + usage);
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
                      " (CUDA_VISIBLE_DEVICES is honoured). " +
                      (plan.gpus.size() == 1 ? "--gpus takes GPU indices, not a count: " : "") +
                      "--gpus all uses every GPU, --gpus cpu the CPU");
  }
  return plan;
}

}  // namespace

HostProcesses host_processes(ProcessGroup* world, const std::vector<GpuInfo>& gpus) {
  if (!world || world->size() == 1) return {};
  HostProcesses h{world->local_rank(), world->local_size(), false};
  std::string ids;
  for (const GpuInfo& g : gpus) ids += " " + g.uuid;
  const Gathered all = gather(*world, ids);  // a collective: before any early return below
  if (h.size < 2) return h;
  const std::string mine = all.host(size_t(world->rank()));
  std::set<std::string> seen;
  bool own = true;
  for (size_t p = 0; p < all.all.size() && own; ++p) {
    if (all.host(p) != mine) continue;
    std::istringstream in(all.text(p));
    std::string id;
    int count = 0;
    while (in >> id) {
      ++count;
      if (!seen.insert(id).second) own = false;  // another process of the host sees it too
    }
    if (count == 0) own = false;
  }
  h.own_gpus = own;
  return h;
}

DevicePlan plan_devices(const std::string& spec, const std::vector<GpuInfo>& gpus, bool cuda_training,
                        const HostProcesses& host) {
  DevicePlan plan = plan_indices(spec, gpus, cuda_training, host);
  for (int idx : plan.gpus)
    for (const GpuInfo& g : gpus)
      if (g.index == idx) plan.gpu_ids.push_back(g.uuid);
  return plan;
}

}  // namespace trainer
