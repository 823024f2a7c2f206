#pragma once
// The DSB 2018 nuclei set beside the repository (../shared/data/dsb2018, CC0;
// its README there): the tests that read it skip with a warning on a clone
// without it, as a user's clone is.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

namespace trainer::testing {

/// <source>/../shared/data/dsb2018.
inline std::string dsb_dir() { return std::string(TRAINER_SOURCE_DIR) + "/../shared/data/dsb2018"; }

/// Whether dsb_dir() holds the set (its flat layout).
inline bool dsb_available() { return std::filesystem::is_directory(dsb_dir() + "/flat"); }

}  // namespace trainer::testing

/// Ends the test case with a warning when the DSB set is not beside the repository.
#define TRAINER_REQUIRE_DSB()                                                                                 \
  do {                                                                                                        \
    if (!::trainer::testing::dsb_available()) {                                                               \
      WARN("skipped: " + ::trainer::testing::dsb_dir() + " is not there (the DSB 2018 set that sits beside " \
           "the repository in its development tree; a clone of its own has none)");                          \
      return;                                                                                                 \
    }                                                                                                         \
  } while (0)
