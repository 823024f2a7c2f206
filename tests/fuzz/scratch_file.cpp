#include "scratch_file.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace trainer::fuzz {

std::string scratch_file(const std::string& name, const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const fs::path dir = [] {
    std::error_code e;
    const fs::path base = fs::is_directory("/dev/shm", e) ? fs::path("/dev/shm") : fs::temp_directory_path();
    const fs::path d = base / ("trainer_fuzz_" + std::to_string(getpid()));
    fs::create_directories(d, e);
    std::atexit([] {
      std::error_code gone;
      fs::remove_all(fs::path("/dev/shm") / ("trainer_fuzz_" + std::to_string(getpid())), gone);
      fs::remove_all(fs::temp_directory_path(gone) / ("trainer_fuzz_" + std::to_string(getpid())), gone);
    });
    return d;
  }();
  const fs::path path = dir / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 std::streamsize(size));
  return path.string();
}

void quiet_logs() { spdlog::set_level(spdlog::level::off); }

}  // namespace trainer::fuzz
