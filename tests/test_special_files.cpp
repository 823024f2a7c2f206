// A FIFO or a device named where trainer expects a file is refused by name
// before anything opens it: opening a FIFO without a writer blocks for ever,
// and /dev/zero or /dev/full read without end.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "process_testing.h"

namespace fs = std::filesystem;
using namespace trainer::testing;

TEST_CASE("a FIFO or a device given as a file is refused at once with exit 2, not opened", "[e2e][cli]") {
  const fs::path dir = temp_dir("special_files");
  const std::string fifo = (dir / "pipe").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_directories(dir / "images");
  const std::string data = " --images " + (dir / "images").string() + " --masks " + (dir / "images").string();
  const std::string checkpoint = " --checkpoint " + (dir / "missing.h5").string();
  const struct {
    std::string args, expected;
  } cases[] = {
      {"--config " + fifo + " --gpus cpu", "--config '" + fifo + "' is a FIFO (named pipe), not a file"},
      {"summary --config " + fifo, "--config '" + fifo + "' is a FIFO (named pipe), not a file"},
      {"--config /dev/zero --gpus cpu", "--config '/dev/zero' is a character device, not a file"},
      {"export" + checkpoint + " --output " + fifo, "--output '" + fifo + "' is a FIFO (named pipe), not a file"},
      {"export" + checkpoint + " --output " + fifo + ".keras", ""},  // absent: on to the checkpoint's error
      {"evaluate" + checkpoint + data + " --csv " + fifo, "--csv '" + fifo + "' is a FIFO (named pipe), not a file"},
      {"evaluate" + checkpoint + data + " --csv /dev/full", "--csv '/dev/full' is a character device, not a file"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const Run r = run_trainer(c.args, dir);
    INFO(r.out << r.err);
    CHECK(r.code == 2);
    if (!c.expected.empty()) CHECK_THAT(r.err, Catch::Contains(c.expected));
    else CHECK_THAT(r.err, Catch::Contains("missing.h5"));
  }
  fs::remove_all(dir);
}
