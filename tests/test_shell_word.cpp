// The command a stopped run prints to continue it: shell words, without the flags a resume replaces.
#include <catch2/catch.hpp>

#include "core/shell_word.h"

using namespace trainer;

TEST_CASE("shell_word quotes what a POSIX shell would split or expand", "[log]") {
  CHECK(shell_word("runs/unet-1/last.h5") == "runs/unet-1/last.h5");
  CHECK(shell_word("--epochs=30") == "--epochs=30");
  CHECK(shell_word("my runs/a") == "'my runs/a'");
  CHECK(shell_word("$HOME*") == "'$HOME*'");
  CHECK(shell_word("it's") == "'it'\\''s'");
  CHECK(shell_word("") == "''");
}

TEST_CASE("command_without_resume keeps a run's flags and drops those a resume replaces", "[log]") {
  CHECK(command_without_resume({"./trainer", "--config", "u.yaml", "-o", "runs/hf", "--images", "my data/img",
                                "--overwrite", "--initial-weights", "w.h5", "--epochs", "300"}) ==
        "./trainer --config u.yaml -o runs/hf --images 'my data/img' --epochs 300");
  CHECK(command_without_resume({"trainer", "--resume", "a/last.h5", "--config=u.yaml", "--resume=b.h5",
                                "--initial-weights=w.h5"}) == "trainer --config=u.yaml");
}
