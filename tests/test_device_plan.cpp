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

TEST_CASE("gpus flag: bad values are user errors that say what exists", "[devices]") {
  std::vector<GpuInfo> gpus = {{0, "NVIDIA H200", 150ull << 30}};
  CHECK_THROWS_WITH(plan_devices("3", gpus, true),
                    Catch::Contains("there is no GPU 3") && Catch::Contains("0 (NVIDIA H200, 150 GiB)"));
  CHECK_THROWS_WITH(plan_devices("0", {}, true), Catch::Contains("no GPU was found"));
  CHECK_THROWS_AS(plan_devices("cpu:0", {}, false), UserError);
  CHECK_THROWS_AS(plan_devices("cpu:x", {}, false), UserError);
  CHECK_THROWS_AS(plan_devices("0,,1", gpus, true), UserError);
  CHECK_THROWS_WITH(plan_devices("gpu", gpus, true), Catch::Contains("is not a GPU index"));
  CHECK_THROWS_WITH(plan_devices("0", gpus, false), Catch::Contains("no CUDA training backend"));
}
