// --gpus parsing and device resolution.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "dist/device_plan.h"

using namespace trainer;

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
  CHECK_THROWS_WITH(plan_devices("1,7", gpus, true), Catch::Contains("there is no GPU 7"));
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
  CHECK(plan_devices("local", gpus, true, 3, 4).gpus == std::vector<int>{3});
  // The launcher bound one GPU to each process: it sees that one alone, as index 0.
  CHECK(plan_devices("local", {{0, "A", 1ull << 34}}, true, 3, 4).gpus == std::vector<int>{0});
  CHECK(plan_devices("all", gpus, true, 0, 2).gpus == std::vector<int>{0, 1});
  CHECK(plan_devices("all", gpus, true, 1, 2).gpus == std::vector<int>{2, 3});
  CHECK(plan_devices("all", gpus, true, 2, 3).gpus == std::vector<int>{2, 3});  // 4 over 3: blocks of 1, 1, 2
  CHECK(plan_devices("all", gpus, true, 0, 3).gpus == std::vector<int>{0});
  CHECK(plan_devices("1,2", gpus, true, 1, 2).gpus == std::vector<int>{1, 2});  // a list is taken as is
  CHECK_THROWS_WITH(plan_devices("local", gpus, true, 4, 5),
                    Catch::Contains("process 4 of this host's 5") && Catch::Contains("no GPU 4") &&
                        Catch::Contains("at most 4 processes per host"));
  CHECK_THROWS_WITH(plan_devices("all", gpus, true, 0, 5), Catch::Contains("cannot be split among its 5 processes"));
  // local asks for a GPU: without one (or without CUDA) it is an error, not a quiet CPU run.
  CHECK_THROWS_WITH(plan_devices("local", {}, false, 1, 2),
                    Catch::Contains("--gpus local: process 1 of this host's 2: no GPU was found") &&
                        Catch::Contains("use --gpus cpu"));
  CHECK_THROWS_WITH(plan_devices("local", gpus, false), Catch::Contains("this build has no CUDA backend"));
}
