#include "core/memory_limit.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

namespace trainer {

namespace {

/// The first line of a small file ("" when it cannot be read).
std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

/// A byte count as the cgroup files write it; nullopt for "max", an empty or malformed value.
std::optional<size_t> parse_bytes(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19)
    return std::nullopt;
  return size_t(std::stoull(text));
}

/// The value of `key` in a "key value" file such as memory.stat (0 when absent).
size_t stat_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k, v;
  while (in >> k >> v)
    if (k == key) return parse_bytes(v).value_or(0);
  return 0;
}

/// Whether the comma-separated list holds item.
bool lists(const std::string& list, const std::string& item) {
  std::stringstream in(list);
  for (std::string part; std::getline(in, part, ',');)
    if (part == item) return true;
  return false;
}

/// The cgroup path of this process in the v2 hierarchy (v2) or in v1's memory hierarchy, from /proc/self/cgroup
/// lines "id:controllers:path"; nullopt when there is none.
std::optional<std::string> cgroup_path(const std::string& proc_cgroup, bool v2) {
  std::ifstream in(proc_cgroup);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? line.compare(0, a, "0") == 0 && controllers.empty() : lists(controllers, "memory"))
      return line.substr(b + 1);
  }
  return std::nullopt;
}

/// The hierarchy mounted as cgroup2 (v2) or as v1's memory controller, from mountinfo lines
/// "id parent dev root mountpoint options ... - fstype source superoptions", with path's folder in it.
std::optional<MemoryCgroup> find_hierarchy(const CgroupFiles& files, bool v2) {
  const std::optional<std::string> path = cgroup_path(files.proc_cgroup, v2);
  if (!path) return std::nullopt;
  std::ifstream in(files.mountinfo);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mount, word;
    fields >> id >> parent >> dev >> root >> mount;
    while (fields >> word && word != "-") {
    }
    std::string fstype, source, options;
    fields >> fstype >> source >> options;
    if (v2 ? fstype != "cgroup2" : fstype != "cgroup" || !lists(options, "memory")) continue;
    // The path is relative to the cgroup namespace's root; the mount shows the hierarchy from `root` down.
    std::string rel = *path;
    if (root != "/" && rel.compare(0, root.size(), root) == 0 && (rel.size() == root.size() || rel[root.size()] == '/'))
      rel = rel.substr(root.size());
    if (rel == "/") rel.clear();
    // Another mount of the hierarchy may show this process's folder (a mount of a subtree holds others only).
    if (std::ifstream(mount + rel + (v2 ? "/cgroup.controllers" : "/memory.limit_in_bytes")))
      return MemoryCgroup{mount, mount + rel, v2};
  }
  return std::nullopt;
}

/// Bytes of swap free on the machine (SwapFree in meminfo, in kB there); 0 when it cannot be read.
size_t machine_swap_free(const std::string& meminfo) {
  std::ifstream in(meminfo);
  std::string key, unit;
  size_t kb = 0;
  while (in >> key >> kb >> unit)
    if (key == "SwapFree:") return kb * 1024;
  return 0;
}

/// The swap a cgroup's processes may still use beyond its memory limit (unbounded: SIZE_MAX): v2's
/// memory.swap.max less memory.swap.current; v1's memory.memsw.limit_in_bytes (memory and swap together) less
/// the memory limit and the swap in use. 0 where the files are missing (no swap accounting).
size_t swap_allowed(const std::string& dir, bool v2, size_t limit, size_t unlimited) {
  if (v2) {
    const std::string max = first_line(dir + "/memory.swap.max");
    if (max == "max") return SIZE_MAX;
    const size_t allowed = parse_bytes(max).value_or(0);
    const size_t used = parse_bytes(first_line(dir + "/memory.swap.current")).value_or(0);
    return allowed > used ? allowed - used : 0;
  }
  const std::optional<size_t> both = parse_bytes(first_line(dir + "/memory.memsw.limit_in_bytes"));
  if (!both) return 0;
  if (*both >= unlimited) return SIZE_MAX;
  const size_t both_used = parse_bytes(first_line(dir + "/memory.memsw.usage_in_bytes")).value_or(0);
  const size_t memory_used = parse_bytes(first_line(dir + "/memory.usage_in_bytes")).value_or(0);
  const size_t swap_used = both_used > memory_used ? both_used - memory_used : 0;
  return *both > limit + swap_used ? *both - limit - swap_used : 0;
}

/// The limit that leaves the least room, from dir up to the hierarchy's mount point (a cgroup's room is its
/// limit less its use, and a parent's use counts its other children's too).
std::optional<MemoryLimit> tightest_limit(const MemoryCgroup& h, const std::string& meminfo) {
  const bool v2 = h.v2;
  const char* limit_file = v2 ? "/memory.max" : "/memory.limit_in_bytes";
  const size_t unlimited = size_t(1) << 62;  // v1 writes "no limit" as the largest page-aligned signed value
  const size_t swap_free = machine_swap_free(meminfo);
  std::optional<MemoryLimit> best;
  for (std::string dir = h.dir;; dir = dir.substr(0, dir.rfind('/'))) {
    const std::optional<size_t> limit = parse_bytes(first_line(dir + limit_file));
    if (limit && *limit < unlimited) {
      const size_t charged = parse_bytes(first_line(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes")))
                                 .value_or(0);
      // The page cache is given back before the kernel kills (v2 "file", v1 "total_cache").
      const size_t cache = stat_value(dir + "/memory.stat", v2 ? "file" : "total_cache");
      MemoryLimit here{*limit, charged > cache ? charged - cache : 0,
                       std::min(swap_allowed(dir, v2, *limit, unlimited), swap_free), dir + limit_file};
      if (!best || here.room() < best->room()) best = here;
    }
    if (dir.size() <= h.mount.size() || dir.find('/') == std::string::npos) break;
  }
  return best;
}

/// Whether a v2 hierarchy holds the memory controller (its cgroup.controllers, space-separated, names it).
bool has_memory_controller(const MemoryCgroup& h) {
  std::istringstream in(first_line(h.mount + "/cgroup.controllers"));
  for (std::string c; in >> c;)
    if (c == "memory") return true;
  return false;
}

}  // namespace

std::optional<MemoryCgroup> memory_cgroup(const CgroupFiles& files) {
  if (std::optional<MemoryCgroup> h = find_hierarchy(files, true); h && has_memory_controller(*h)) return h;
  return find_hierarchy(files, false);
}

std::optional<MemoryLimit> cgroup_memory_limit(const CgroupFiles& files) {
  const std::optional<MemoryCgroup> cgroup = memory_cgroup(files);
  return cgroup ? tightest_limit(*cgroup, files.meminfo) : std::nullopt;
}

std::string memory_size(size_t bytes) {
  char text[32];
  if (bytes >= (size_t(1) << 30))
    std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(size_t(1) << 30));
  else
    std::snprintf(text, sizeof text, "%zu MiB", (bytes + (size_t(1) << 20) - 1) >> 20);
  return text;
}

}  // namespace trainer
