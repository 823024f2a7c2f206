// --gpus parsing and device resolution, and how the processes of a host see
// their GPUs (through a fake process group).
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/error.h"
#include "dist/device_plan.h"

using namespace trainer;

namespace {

/// Process `me` of a run whose processes sit on hosts[p] and see the GPUs ids[p] (UUIDs, space-separated);
/// only all_gather is used.
class HostsGroup : public ProcessGroup {
 public:
  HostsGroup(int me, std::vector<std::string> hosts, std::vector<std::string> ids)
      : me_(me), hosts_(std::move(hosts)), ids_(std::move(ids)) {}
  int rank() const override { return me_; }
  int size() const override { return int(hosts_.size()); }
  int local_rank() const override { return int(std::count(hosts_.begin(), hosts_.begin() + me_, hosts_[size_t(me_)])); }
  int local_size() const override { return int(std::count(hosts_.begin(), hosts_.end(), hosts_[size_t(me_)])); }
  const std::string& host() const override { return hosts_[size_t(me_)]; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum(double*, size_t) override {}
  void all_reduce_max(double*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
  std::vector<std::string> all_gather(const std::string& text) override {
    std::vector<std::string> all;
    for (size_t p = 0; p < hosts_.size(); ++p)
      all.push_back(int(p) == me_ ? text : hosts_[p] + "\n" + (ids_[p].empty() ? "" : " " + ids_[p]));
    return all;
  }

 private:
  int me_;
  std::vector<std::string> hosts_, ids_;
};

/// GPUs 0.. with the given UUIDs.
std::vector<GpuInfo> gpus_with(const std::vector<std::string>& uuids) {
  std::vector<GpuInfo> out;
  for (size_t i = 0; i < uuids.size(); ++i) out.push_back({int(i), "H100", 80ull << 30, uuids[i]});
  return out;
}

}  // namespace

TEST_CASE("gpus flag: cpu and cpu:N give CPU towers", "[devices]") {
  CHECK(plan_devices("cpu", {}, false).cpu_towers == 1);
  CHECK(plan_devices("cpu:3", {}, false).cpu_towers == 3);
  CHECK(plan_devices("cpu:3", {}, false).describe() == "3 CPU towers");
}

TEST_CASE("gpus flag: all without a GPU falls back to one CPU tower with a warning", "[devices]") {
  DevicePlan p = plan_devices("all", {}, false);
  CHECK(p.cpu_towers == 1);
  REQUIRE(p.warnings.size() == 1);
  CHECK_THAT(p.warnings[0], Catch::Contains("no GPU found"));
}

TEST_CASE("gpus flag: all takes every GPU when the build can train on them", "[devices]") {
  std::vector<GpuInfo> gpus = {{0, "A", 1ull << 34}, {1, "B", 1ull << 34}};
  DevicePlan p = plan_devices("all", gpus, true);
  CHECK(p.gpus == std::vector<int>{0, 1});
  CHECK(plan_devices("1,0,1", gpus, true).gpus == std::vector<int>{1, 0, 1});
}

TEST_CASE("gpus flag: a single number is a GPU index, not a count", "[devices]") {
  std::vector<GpuInfo> gpus = {{0, "A", 1ull << 34}, {1, "B", 1ull << 34}, {2, "C", 1ull << 34}, {3, "D", 1ull << 34}};
  DevicePlan p = plan_devices("2", gpus, true);
  CHECK(p.gpus == std::vector<int>{2});
  CHECK(p.towers() == 1);
  CHECK(p.describe() == "GPU 2");
  CHECK(plan_devices("0,3", gpus, true).gpus == std::vector<int>{0, 3});
  // Keras's gpus=4 meant four GPUs; here it names a GPU that does not exist, and the message says so.
  CHECK_THROWS_WITH(plan_devices("4", gpus, true),
                    Catch::Contains("there is no GPU 4") && Catch::Contains("indices, not a count"));
}

TEST_CASE("gpus flag: repeated GPUs give towers sharing a GPU, which NCCL cannot reduce", "[devices]") {
  std::vector<GpuInfo> gpus = {{0, "A", 1ull << 34}, {1, "B", 1ull << 34}};
  DevicePlan shared = plan_devices("0,0", gpus, true);
  CHECK(shared.gpus == std::vector<int>{0, 0});
  CHECK(shared.towers() == 2);
  CHECK_FALSE(shared.gpus_distinct());
  CHECK_FALSE(plan_devices("1,0,1", gpus, true).gpus_distinct());
  CHECK(plan_devices("1,0", gpus, true).gpus_distinct());
  CHECK(plan_devices("all", gpus, true).gpus_distinct());
  CHECK(plan_devices("cpu:3", gpus, true).gpus_distinct());
}

TEST_CASE("gpus flag: a build without CUDA says so rather than that no GPU exists", "[devices]") {
  // Such a build lists no GPU (list_gpus() is empty), so the build is the cause to report.
  CHECK_THROWS_WITH(plan_devices("0", {}, false), Catch::Contains("no CUDA training backend"));
  DevicePlan p = plan_devices("all", {{0, "NVIDIA H200", 150ull << 30}}, false);
  CHECK(p.cpu_towers == 1);
  REQUIRE(p.warnings.size() == 1);
  CHECK_THAT(p.warnings[0], Catch::Contains("0 (NVIDIA H200, 150 GiB)") && Catch::Contains("no CUDA backend"));
  // Syntax is still checked first.
  CHECK_THROWS_WITH(plan_devices("0,x", {}, false), Catch::Contains("'x' is not a GPU index"));
}

TEST_CASE("gpus flag: bad values are user errors that say what exists", "[devices]") {
  std::vector<GpuInfo> gpus = {{0, "NVIDIA H200", 150ull << 30}, {1, "NVIDIA H100", 80ull << 30}};
  CHECK_THROWS_WITH(plan_devices("3", gpus, true),
                    Catch::Contains("there is no GPU 3") &&
                        Catch::Contains("GPUs found: 0 (NVIDIA H200, 150 GiB) 1 (NVIDIA H100, 80 GiB)"));
  CHECK_THROWS_WITH(plan_devices("1,7", gpus, true), Catch::Contains("there is no GPU 7") &&
                                                        !Catch::Contains("not a count"));  // a list is no count
  CHECK_THROWS_WITH(plan_devices("CPU", gpus, true), Catch::Contains("did you mean 'cpu'?"));
  CHECK_THROWS_WITH(plan_devices("Cpu:2", gpus, true), Catch::Contains("did you mean 'cpu:2'?"));
  CHECK_THROWS_WITH(plan_devices("ALL", gpus, true), Catch::Contains("did you mean 'all'?"));
  CHECK_THROWS_WITH(plan_devices("0", {}, true), Catch::Contains("no GPU was found"));
  CHECK_THROWS_AS(plan_devices("cpu:0", {}, false), UserError);
  CHECK_THROWS_AS(plan_devices("cpu:x", {}, false), UserError);
  CHECK_THROWS_AS(plan_devices("0,,1", gpus, true), UserError);
  CHECK_THROWS_WITH(plan_devices("gpu", gpus, true), Catch::Contains("is not a GPU index"));
  CHECK_THROWS_WITH(plan_devices("0", gpus, false), Catch::Contains("no CUDA training backend"));
}

TEST_CASE("gpus flag: local takes the GPU of the process's rank on its host, all splits the host's GPUs",
          "[devices][mpi]") {
  const std::vector<GpuInfo> gpus = {{0, "A", 1ull << 34, "GPU-a"}, {1, "B", 1ull << 34, "GPU-b"},
                                     {2, "C", 1ull << 34, "GPU-c"}, {3, "D", 1ull << 34, "GPU-d"}};
  CHECK(plan_devices("local", gpus, true).gpus == std::vector<int>{0});  // a process alone
  // The UUIDs of the GPUs planned, which the processes compare (TowerDevices).
  CHECK(plan_devices("2,1", gpus, true).gpu_ids == std::vector<std::string>{"GPU-c", "GPU-b"});
  CHECK(plan_devices("local", gpus, true, {3, 4}).gpus == std::vector<int>{3});
  // The launcher bound one GPU to each process: it sees that one alone, as index 0.
  CHECK(plan_devices("local", {{0, "A", 1ull << 34}}, true, {3, 4}).gpus == std::vector<int>{0});
  CHECK(plan_devices("all", gpus, true, {0, 2}).gpus == std::vector<int>{0, 1});
  CHECK(plan_devices("all", gpus, true, {1, 2}).gpus == std::vector<int>{2, 3});
  CHECK(plan_devices("all", gpus, true, {2, 3}).gpus == std::vector<int>{2, 3});  // 4 over 3: blocks of 1, 1, 2
  CHECK(plan_devices("all", gpus, true, {0, 3}).gpus == std::vector<int>{0});
  CHECK(plan_devices("1,2", gpus, true, {1, 2}).gpus == std::vector<int>{1, 2});  // a list is taken as is
  CHECK_THROWS_WITH(plan_devices("local", gpus, true, {4, 5}),
                    Catch::Contains("process 4 of this host's 5") && Catch::Contains("no GPU 4") &&
                        Catch::Contains("at most 4 processes per host"));
  CHECK_THROWS_WITH(plan_devices("all", gpus, true, {0, 5}), Catch::Contains("cannot be split among its 5 processes"));
  // local asks for a GPU: without one (or without CUDA) it is an error, not a quiet CPU run.
  CHECK_THROWS_WITH(plan_devices("local", {}, false, {1, 2}),
                    Catch::Contains("--gpus local: process 1 of this host's 2: no GPU was found") &&
                        Catch::Contains("use --gpus cpu"));
  CHECK_THROWS_WITH(plan_devices("local", gpus, false), Catch::Contains("this build has no CUDA backend"));
}

TEST_CASE("processes of a host that see disjoint GPUs take every GPU they see, with all and local",
          "[devices][mpi]") {
  // srun --ntasks-per-node=4 --gpus-per-task=2: each of a host's 4 processes sees its own 2 GPUs as 0 and 1.
  const std::vector<std::string> hosts = {"a", "a", "a", "a", "b", "b", "b", "b"};
  const std::vector<std::string> bound = {"G0 G1", "G2 G3", "G4 G5", "G6 G7", "G0 G1", "G2 G3", "G4 G5", "G6 G7"};
  HostsGroup p3(3, hosts, bound), p6(6, hosts, bound);
  const HostProcesses h3 = host_processes(&p3, gpus_with({"G6", "G7"}));
  CHECK(h3.rank == 3);
  CHECK(h3.size == 4);
  CHECK(h3.own_gpus);  // the same UUIDs on host b do not count against host a
  CHECK(host_processes(&p6, gpus_with({"G4", "G5"})).own_gpus);
  const std::vector<GpuInfo> two = gpus_with({"G6", "G7"});
  CHECK(plan_devices("all", two, true, h3).gpus == std::vector<int>{0, 1});
  CHECK(plan_devices("local", two, true, h3).gpus == std::vector<int>{0, 1});
  CHECK(plan_devices("all", two, true, h3).gpu_ids == std::vector<std::string>{"G6", "G7"});
  // Without the binding the same layout cannot be split, and says how to bind.
  CHECK_THROWS_WITH(plan_devices("all", two, true, HostProcesses{3, 4, false}),
                    Catch::Contains("cannot be split") && Catch::Contains("srun --gpus-per-task=N"));
  CHECK_THROWS_WITH(plan_devices("local", two, true, HostProcesses{3, 4, false}), Catch::Contains("no GPU 3"));
}

TEST_CASE("processes of a host that share GPUs split them as before", "[devices][mpi]") {
  // mpirun -np 4 on a host of 4 GPUs: every process sees all 4.
  const std::vector<std::string> hosts = {"a", "a", "a", "a"};
  const std::string all4 = "G0 G1 G2 G3";
  HostsGroup p1(1, hosts, {all4, all4, all4, all4});
  const HostProcesses h = host_processes(&p1, gpus_with({"G0", "G1", "G2", "G3"}));
  CHECK_FALSE(h.own_gpus);
  CHECK(plan_devices("local", gpus_with({"G0", "G1", "G2", "G3"}), true, h).gpus == std::vector<int>{1});
  // One GPU seen by two processes, the others' own: not a binding.
  HostsGroup partial(0, {"a", "a", "a"}, {"G0 G1", "G1 G2", "G3"});
  CHECK_FALSE(host_processes(&partial, gpus_with({"G0", "G1"})).own_gpus);
  // A process that sees no GPU: not a binding either (its plan says so).
  HostsGroup none(0, {"a", "a"}, {"G0", ""});
  CHECK_FALSE(host_processes(&none, gpus_with({"G0"})).own_gpus);
  // A process alone on its host keeps local's meaning: one GPU, the first.
  HostsGroup alone(0, {"a", "b"}, {"G0 G1", "G0 G1"});
  const HostProcesses a = host_processes(&alone, gpus_with({"G0", "G1"}));
  CHECK(a.size == 1);
  CHECK_FALSE(a.own_gpus);
  CHECK(plan_devices("local", gpus_with({"G0", "G1"}), true, a).gpus == std::vector<int>{0});
  CHECK_FALSE(host_processes(nullptr, gpus_with({"G0"})).own_gpus);
}
