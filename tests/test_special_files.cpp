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

TEST_CASE("a truncated PNG is named with what is wrong, without libpng's own line", "[e2e][data]") {
  const fs::path dir = temp_dir("truncated_png");
  const fs::path sample = fs::path(TRAINER_SOURCE_DIR) / "data" / "sample";
  fs::create_directories(dir / "images");
  fs::create_directories(dir / "masks");
  std::string first;
  for (const auto& e : fs::directory_iterator(sample / "images"))
    if (first.empty() || e.path().filename().string() < first) first = e.path().filename().string();
  REQUIRE_FALSE(first.empty());
  const std::string stem = fs::path(first).stem().string();
  fs::copy_file(sample / "masks" / (stem + "_mask.png"), dir / "masks" / (stem + "_mask.png"));
  const std::string bytes = slurp(sample / "images" / first);
  std::ofstream(dir / "images" / first, std::ios::binary) << bytes.substr(0, bytes.size() / 2);  // cut mid-file
  std::ofstream(dir / "unet.yaml") << sample_unet_config(dir / "run", "  epochs: 1\n");
  const Run r = run_trainer("--config " + (dir / "unet.yaml").string() + " --gpus cpu --images " +
                                (dir / "images").string() + " --masks " + (dir / "masks").string(),
                            dir);
  INFO(r.out << r.err);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("the PNG ends before its IEND chunk") && !Catch::Contains("libpng"));
  fs::remove_all(dir);
}
