// One training run at a time in an output folder (io/folder_lock.h).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "core/error.h"
#include "io/folder_lock.h"

using namespace trainer;
namespace fs = std::filesystem;

TEST_CASE("a second run into a folder that a run holds is refused, naming the holder, until it ends",
          "[checkpoint]") {
  // From a new user: a run resumed from another's last.h5 while that one trained overwrote its checkpoints.
  const fs::path dir = fs::temp_directory_path() / ("trainer_lock_" + std::to_string(::getpid())) / "run";
  fs::remove_all(dir.parent_path());
  {
    std::optional<FolderLock> first;
    first.emplace(dir.string());  // makes the folder
    CHECK(fs::is_directory(dir));
    CHECK_THROWS_AS(FolderLock(dir.string()), UserError);
    CHECK_THROWS_WITH(FolderLock(dir.string()),
                      Catch::Contains("output folder '" + dir.string() + "' is in use by another training run (pid " +
                                      std::to_string(::getpid()) + " on host ") &&
                          Catch::Contains("choose another --output"));
    first.reset();
    CHECK_NOTHROW(FolderLock(dir.string()));  // released when the holder ends
  }
  fs::remove_all(dir.parent_path());
}
