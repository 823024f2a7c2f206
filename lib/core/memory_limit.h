#pragma once
// The memory limit of the control group (cgroup) this process runs in, as
// a container (docker run --memory, Kubernetes limits), Slurm or systemd
// sets it. Past that limit the kernel kills the process (SIGKILL, exit 137)
// instead of failing an allocation, so a run plans against it before
// loading what it cannot hold, as the GPU path plans against free device
// memory.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace trainer {

/// A cgroup's memory limit and what its processes hold of it.
struct MemoryLimit {
  size_t limit = 0;   ///< Bytes: memory.max (cgroup v2) or memory.limit_in_bytes (v1).
  size_t in_use = 0;  ///< Bytes charged to the cgroup less its page cache, which the kernel reclaims first.
  /// Bytes of swap its processes may still use past the limit (memory.swap.max, memory.memsw.limit_in_bytes),
  /// at most the machine's free swap; 0 without swap. Past the limit the kernel swaps before it kills.
  size_t swap = 0;
  std::string file;   ///< The limit's file, for messages.
  /// Bytes that can still be held before the kernel kills: the limit less the use, plus the swap.
  size_t room() const {
    const size_t memory = in_use < limit ? limit - in_use : 0;
    return swap > SIZE_MAX - memory ? SIZE_MAX : memory + swap;
  }
};

/// Where cgroup_memory_limit reads (tests point them at a tree of their own).
struct CgroupFiles {
  std::string proc_cgroup = "/proc/self/cgroup";        ///< This process's cgroup per hierarchy.
  std::string mountinfo = "/proc/self/mountinfo";       ///< Where the hierarchies are mounted.
  std::string meminfo = "/proc/meminfo";                ///< The machine's free swap (SwapFree).
};

/// This process's cgroup in the hierarchy that holds the memory controller.
struct MemoryCgroup {
  std::string mount;  ///< The hierarchy's mount point, e.g. /sys/fs/cgroup or /sys/fs/cgroup/memory.
  std::string dir;    ///< The cgroup's folder under it (the mount point itself for the root).
  bool v2 = false;    ///< cgroup v2 (memory.max), else v1 (memory.limit_in_bytes).
};

/// This process's memory cgroup: in the v2 hierarchy when it holds the
/// memory controller (a hybrid system mounts v2 without it beside v1's
/// memory hierarchy), else in v1's; nullopt when neither can be read (not
/// Linux, not mounted). Paths in proc_cgroup are taken relative to the
/// mount's root (a cgroup namespace's "/" or the container's own folder).
/// Never throws.
std::optional<MemoryCgroup> memory_cgroup(const CgroupFiles& files = {});

/// The memory limit that leaves the least room over this process's cgroup
/// and its ancestors (a limit bounds every cgroup below it, and a parent's
/// use counts its other children's), with that cgroup's use; nullopt
/// when none is set ("max", or v1's unlimited value) or there is no
/// memory_cgroup. Never throws.
std::optional<MemoryLimit> cgroup_memory_limit(const CgroupFiles& files = {});

/// "1.5 GiB", "340 MiB": bytes in binary units, for messages.
std::string memory_size(size_t bytes);

}  // namespace trainer
