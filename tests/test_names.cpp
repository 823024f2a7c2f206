// ctest runs each Catch test case by name (catch_discover_tests): a name with
// ';' becomes two CMake list items, one starting with '-' reads as a flag, and
// an unpaired '[' stops CMake splitting the list of names after it, so such a
// test (or every later one) would silently not run. This keeps every name safe.
#include <catch2/catch.hpp>

TEST_CASE("every test name is safe to pass through ctest", "[meta]") {
  const auto& tests = Catch::getRegistryHub().getTestCaseRegistry().getAllTests();
  REQUIRE(tests.size() > 50);
  for (const auto& t : tests) {
    INFO(t.name);
    CHECK(t.name.find(';') == std::string::npos);
    CHECK(t.name.front() != '-');
    // CMake does not split a list at a ';' inside square brackets: one unclosed '[' ("[0, 1)") merged every
    // later test into one ctest entry. Brackets must pair up.
    int depth = 0;
    for (const char ch : t.name) {
      depth += ch == '[' ? 1 : ch == ']' ? -1 : 0;
      CHECK(depth >= 0);
    }
    CHECK(depth == 0);
  }
}
