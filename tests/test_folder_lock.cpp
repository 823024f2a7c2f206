// One training run (or predict) at a time in an output folder (io/folder_lock.h).
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
  // A run resumed from another's last.h5 while that one trained overwrote its checkpoints.
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

TEST_CASE("a second predict into a folder that one writes is refused until it ends", "[checkpoint][predict]") {
  // From a batch-job trial: two predicts into one folder left a mixture of both, each exiting with 0.
  const fs::path dir = fs::temp_directory_path() / ("trainer_dirlock_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::optional<DirectoryLock> first;
    first.emplace(dir.string(), "predict");
    CHECK_THROWS_WITH(DirectoryLock(dir.string(), "predict"),
                      Catch::Contains("output folder '" + dir.string() + "' is being written by another predict") &&
                          Catch::Contains("choose another --output"));
    first.reset();
    CHECK_NOTHROW(DirectoryLock(dir.string(), "predict"));
  }
  CHECK(fs::is_empty(dir));  // no file of its own
  CHECK_THROWS_WITH(DirectoryLock((dir / "missing").string(), "predict"), Catch::Contains("cannot open"));
  fs::remove_all(dir);
}
