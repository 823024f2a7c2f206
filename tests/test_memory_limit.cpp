// The cgroup memory limit read from a cgroup tree built in the test (v2, v1,
// a hybrid of both, a namespaced mount), the plan against it, and a run in a
// real cgroup with a limit too small for its data: refused with exit 2 and a
// message before loading, not killed.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "core/memory_limit.h"
#include "process_testing.h"
#include "train/host_memory.h"

using namespace trainer;
using trainer::testing::Run;
using trainer::testing::TempDir;
using trainer::testing::run;
using trainer::testing::sample_unet_config;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

/// A process in cgroup `path` of a v2 hierarchy mounted at root/cg (mount root mount_root).
CgroupFiles v2_tree(const fs::path& root, const std::string& path, const std::string& mount_root = "/") {
  write(root / "proc_cgroup", "0::" + path + "\n");
  write(root / "mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
                            "31 22 0:28 " + mount_root + " " + (root / "cg").string() +
                                " rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
  return {(root / "proc_cgroup").string(), (root / "mountinfo").string(), (root / "meminfo").string()};
}

}  // namespace

TEST_CASE("cgroup v2: the memory.max that leaves the least room over the cgroup and its ancestors, its use less "
          "its page cache", "[memory_limit]") {
  TempDir tmp("cgroup_v2");
  const fs::path cg = tmp.root / "cg";
  const CgroupFiles files = v2_tree(tmp.root, "/a/b");
  write(cg / "cgroup.controllers", "cpuset cpu io memory pids\n");
  write(cg / "a/memory.max", "1073741824\n");
  write(cg / "a/memory.current", "300000000\n");
  write(cg / "a/memory.stat", "anon 200000000\nfile 100000000\ninactive_file 60000000\nactive_file 40000000\n");
  write(cg / "a/b/cgroup.controllers", "memory\n");
  write(cg / "a/b/memory.max", "max\n");
  write(cg / "a/b/memory.current", "1000\n");
  auto limit = cgroup_memory_limit(files);
  REQUIRE(limit);
  CHECK(limit->limit == 1073741824);
  CHECK(limit->in_use == 200000000);
  CHECK(limit->swap == 0);  // no swap on the machine (no meminfo)
  CHECK(limit->room() == 1073741824 - 200000000);
  CHECK(limit->file == (cg / "a/memory.max").string());

  SECTION("a limit below that leaves less room wins") {
    write(cg / "a/b/memory.max", "536870912\n");
    limit = cgroup_memory_limit(files);
    REQUIRE(limit);
    CHECK(limit->limit == 536870912);
    CHECK(limit->in_use == 1000);  // no memory.stat there: nothing to take off
  }
  SECTION("a larger limit below does not hide a parent whose other children hold most of its own") {
    write(cg / "a/b/memory.max", "900000000\n");  // room 899,999,000 here; the parent's, 873,741,824
    limit = cgroup_memory_limit(files);
    REQUIRE(limit);
    CHECK(limit->limit == 1073741824);
  }
  SECTION("swap the cgroup may use, up to the machine's free swap, adds to the room") {
    write(tmp.root / "meminfo", "MemTotal: 1000 kB\nSwapTotal: 4096 kB\nSwapFree: 2048 kB\n");
    write(cg / "a/memory.swap.max", "max\n");
    limit = cgroup_memory_limit(files);
    REQUIRE(limit);
    CHECK(limit->swap == 2048 * 1024);
    CHECK(limit->room() == 1073741824 - 200000000 + 2048 * 1024);
    write(cg / "a/memory.swap.max", "1048576\n");
    write(cg / "a/memory.swap.current", "524288\n");
    CHECK(cgroup_memory_limit(files)->swap == 524288);
    write(cg / "a/memory.swap.max", "0\n");
    CHECK(cgroup_memory_limit(files)->swap == 0);
  }
  SECTION("no limit anywhere") {
    write(cg / "a/memory.max", "max\n");
    CHECK_FALSE(cgroup_memory_limit(files));
  }
  SECTION("use above the limit leaves no room") {
    write(cg / "a/memory.current", "2000000000\n");
    write(cg / "a/memory.stat", "inactive_file 0\n");
    limit = cgroup_memory_limit(files);
    REQUIRE(limit);
    CHECK(limit->room() == 0);
  }
}

TEST_CASE("cgroup v2 mounted at the container's own folder: its path is taken below the mount's root",
          "[memory_limit]") {
  TempDir tmp("cgroup_ns");
  const fs::path cg = tmp.root / "cg";
  const CgroupFiles files = v2_tree(tmp.root, "/docker/abc", "/docker/abc");
  write(cg / "cgroup.controllers", "memory\n");
  write(cg / "memory.max", "268435456\n");
  write(cg / "memory.current", "1048576\n");
  const auto limit = cgroup_memory_limit(files);
  REQUIRE(limit);
  CHECK(limit->limit == 268435456);
  CHECK(limit->in_use == 1048576);
}

TEST_CASE("cgroup v1: memory.limit_in_bytes of the memory hierarchy, also beside a v2 mount without the controller",
          "[memory_limit]") {
  TempDir tmp("cgroup_v1");
  const fs::path mem = tmp.root / "mem";
  write(tmp.root / "proc_cgroup", "5:devices:/\n4:memory:/jobs/j1\n0::/\n");
  write(tmp.root / "mountinfo",
        "31 22 0:28 / " + (tmp.root / "unified").string() + " rw - cgroup2 cgroup2 rw\n"
        "35 22 0:32 / " + mem.string() + " rw,relatime - cgroup cgroup rw,memory\n");
  write(tmp.root / "unified/cgroup.controllers", "cpu io\n");  // hybrid: v2 without memory
  write(mem / "memory.limit_in_bytes", "9223372036854771712\n");  // the root: no limit
  write(mem / "jobs/memory.limit_in_bytes", "9223372036854771712\n");
  write(mem / "jobs/j1/memory.limit_in_bytes", "536870912\n");
  write(mem / "jobs/j1/memory.usage_in_bytes", "100000000\n");
  write(mem / "jobs/j1/memory.stat", "cache 50000000\ntotal_cache 30000000\n");
  const CgroupFiles files{(tmp.root / "proc_cgroup").string(), (tmp.root / "mountinfo").string(),
                          (tmp.root / "meminfo").string()};
  auto limit = cgroup_memory_limit(files);
  REQUIRE(limit);
  CHECK(limit->limit == 536870912);
  CHECK(limit->in_use == 70000000);
  SECTION("memory and swap together (memsw) leave the swap beyond the memory limit") {
    write(tmp.root / "meminfo", "SwapFree: 1048576 kB\n");
    write(mem / "jobs/j1/memory.memsw.limit_in_bytes", "805306368\n");  // 256 MiB of swap
    write(mem / "jobs/j1/memory.memsw.usage_in_bytes", "110000000\n");  // 10,000,000 of it used
    CHECK(cgroup_memory_limit(files)->swap == 268435456 - 10000000);
  }
  CHECK(limit->file == (mem / "jobs/j1/memory.limit_in_bytes").string());

  SECTION("unlimited") {
    write(mem / "jobs/j1/memory.limit_in_bytes", "9223372036854771712\n");
    CHECK_FALSE(cgroup_memory_limit(files));
  }
  SECTION("no cgroup file system") {
    CHECK_FALSE(cgroup_memory_limit({(tmp.root / "missing").string(), (tmp.root / "mountinfo").string(), ""}));
    CHECK_FALSE(cgroup_memory_limit({(tmp.root / "proc_cgroup").string(), (tmp.root / "missing").string(), ""}));
  }
  SECTION("a mount of another subtree does not stand for this cgroup") {
    const fs::path other = tmp.root / "other";  // the hierarchy's /job, which /jobs/j1 is not below
    write(other / "memory.limit_in_bytes", "1000\n");
    write(tmp.root / "mountinfo", "35 22 0:32 /job " + other.string() + " rw - cgroup cgroup rw,memory\n");
    CHECK_FALSE(cgroup_memory_limit(files));
  }
  SECTION("malformed values are no limit") {
    write(mem / "jobs/j1/memory.limit_in_bytes", "lots\n");
    CHECK_FALSE(cgroup_memory_limit(files));
    write(mem / "jobs/j1/memory.limit_in_bytes", "99999999999999999999999\n");
    CHECK_FALSE(cgroup_memory_limit(files));
  }
}

TEST_CASE("held_bytes: a byte a channel and a mask byte a pixel, at the held size or each image's own size",
          "[memory_limit]") {
  DataOptions o;
  o.images_dir = std::string(TRAINER_SOURCE_DIR) + "/data/sample/images";
  o.masks_dir = std::string(TRAINER_SOURCE_DIR) + "/data/sample/masks";
  o.height = 100, o.width = 50, o.channels = 3;
  const std::vector<ImagePair> pairs = find_image_pairs(o);
  REQUIRE(pairs.size() == 40);
  CHECK(held_bytes(pairs, o) == 40 * 100 * 50 * 4);
  o.classes = 300;  // uint16 masks
  CHECK(held_bytes(pairs, o) == 40 * 100 * 50 * 5);
  o.classes = 0;
  o.native_scale = 0.5;  // the sample's 36 256x256 and 4 320x256 files (data/sample/README.md) at half their size
  CHECK(held_bytes(pairs, o) == (36 * 128 * 128 + 4 * 160 * 128) * 4);
}

TEST_CASE("require_host_memory refuses a plan above the room the limit leaves, naming its parts and the limit",
          "[memory_limit]") {
  HostMemoryPlan plan;
  plan.training = size_t(600) << 20, plan.pairs = 596;
  plan.validation = size_t(60) << 20, plan.validation_pairs = 60;
  plan.activations = size_t(400) << 20, plan.batch = 16;
  MemoryLimit limit{size_t(2) << 30, size_t(500) << 20, 0, "/sys/fs/cgroup/memory.max"};
  CHECK_NOTHROW(require_host_memory(plan, limit, "unet.yaml"));
  limit.in_use = size_t(1100) << 20;
  try {
    require_host_memory(plan, limit, "unet.yaml");
    FAIL("no error");
  } catch (const UserError& e) {
    const std::string m = e.what();
    CHECK(m.rfind("unet.yaml: this run needs at least 1.04 GiB more memory", 0) == 0);
    CHECK(m.find("596 training pairs held decoded (600 MiB)") != std::string::npos);
    CHECK(m.find("60 validation pairs (60 MiB)") != std::string::npos);
    CHECK(m.find("a batch of 16 (400 MiB)") != std::string::npos);
    CHECK(m.find("leaves 948 MiB (2.00 GiB in /sys/fs/cgroup/memory.max, 1.07 GiB in use)") != std::string::npos);
    CHECK(m.find("training.batch_size") != std::string::npos);
  }
}

namespace {

/// A child cgroup of this process's memory cgroup with a limit of `bytes`, removed when it goes; dir is ""
/// (and why says why) where none can be made: no cgroup file system, no permission, v2 without the memory
/// controller delegated to children.
struct LimitedCgroup {
  std::string dir, why;
  LimitedCgroup(const std::string& name, size_t bytes) {
    const std::optional<MemoryCgroup> own = memory_cgroup();
    if (!own) {
      why = "no memory cgroup";
      return;
    }
    const fs::path child = fs::path(own->dir) / (name + "_" + std::to_string(getpid()));
    std::error_code ec;
    fs::create_directory(child, ec);
    if (ec) {
      why = "cannot make a cgroup in " + own->dir + ": " + ec.message();
      return;
    }
    dir = child.string();
    std::ofstream limit(child / (own->v2 ? "memory.max" : "memory.limit_in_bytes"));
    if (!(limit << bytes << std::flush)) why = "cannot set the limit of " + dir;
    // No swap beyond it, where the machine has swap accounting (else the room would include the swap).
    std::ofstream(child / (own->v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes")) << (own->v2 ? 0 : bytes);
  }
  ~LimitedCgroup() {
    if (!dir.empty()) ::rmdir(dir.c_str());
  }
};

}  // namespace

TEST_CASE("a run whose data and batch exceed its cgroup's memory limit is refused before loading, not killed",
          "[memory_limit][e2e]") {
  TempDir tmp("cgroup_run");
  LimitedCgroup cgroup("trainer_test", size_t(384) << 20);
  if (cgroup.dir.empty() || !cgroup.why.empty()) {
    WARN("skipped: " + cgroup.why);
    return;
  }
  const std::string sample = std::string(TRAINER_SOURCE_DIR) + "/data/sample";
  // 40 pairs held at 2048x2048 RGB take 640 MiB. A step of a batch of 4
  // holds the outputs (in 48, c1 128, out 16 MiB a sample) and the gradients
  // of out (16) and c1 (128): 1344 MiB.
  std::ofstream(tmp.root / "big.yaml") << R"(model:
  layers:
    - {name: in, type: Input, shape: [2048, 2048, 3]}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data:
  images: )" + sample + R"(/images
  masks: )" + sample + R"(/masks
training:
  epochs: 1
  batch_size: 4
  output_dir: )" + (tmp.root / "big").string() + "\n";
  std::ofstream(tmp.root / "small.yaml") << sample_unet_config(tmp.root / "small", "  epochs: 1\n  batch_size: 4\n");
  const auto in_cgroup = [&](const std::string& config) {
    // ASAN_OPTIONS: in the sanitizer build, a small quarantine of freed blocks (256 MiB by default).
    return "-c \"echo \\$\\$ > " + cgroup.dir + "/cgroup.procs && ASAN_OPTIONS=quarantine_size_mb=16 exec " +
           TRAINER_BINARY + " --config " +
           (tmp.root / config).string() + " --gpus cpu\"";
  };
  const Run big = run("/bin/sh", in_cgroup("big.yaml"), trainer::testing::fresh_subdir(tmp.root, "big_run"));
  INFO(big.err);
  CHECK(big.code == 2);
  CHECK(big.err.find("this run needs at least 1.94 GiB more memory") != std::string::npos);
  CHECK(big.err.find("40 training pairs held decoded (640 MiB)") != std::string::npos);
  CHECK(big.err.find("384 MiB in " + cgroup.dir) != std::string::npos);
  CHECK_FALSE(fs::exists(tmp.root / "big" / "last.h5"));
  // The same limit holds a run that fits: the plan does not refuse everything.
  const Run small = run("/bin/sh", in_cgroup("small.yaml"), trainer::testing::fresh_subdir(tmp.root, "small_run"));
  INFO(small.err);
  CHECK(small.code == 0);
  CHECK(fs::exists(tmp.root / "small" / "final.h5"));
}
