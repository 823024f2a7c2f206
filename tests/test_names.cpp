// ctest runs each Catch test case by name (catch_discover_tests): a name with
// ';' becomes two CMake list items and one starting with '-' reads as a flag,
// so such a test would silently not run. This keeps every name safe.
#include <catch2/catch.hpp>

TEST_CASE("every test name is safe to pass through ctest", "[meta]") {
  const auto& tests = Catch::getRegistryHub().getTestCaseRegistry().getAllTests();
  REQUIRE(tests.size() > 50);
  for (const auto& t : tests) {
    INFO(t.name);
    CHECK(t.name.find(';') == std::string::npos);
    CHECK(t.name.front() != '-');
  }
}
