// Catch2 entry point for unit_tests (all test files are linked into one binary).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
