#pragma once
// The fuzz harnesses' inputs as files: the readers under test take paths.
#include <cstddef>
#include <cstdint>
#include <string>

namespace trainer::fuzz {

/// Writes size bytes to a file of this process named `name` (in /dev/shm when
/// it exists, else the system's temp folder) and returns its path. The same
/// name gives the same path, overwritten, on every call.
std::string scratch_file(const std::string& name, const uint8_t* data, size_t size);

/// Quiets the library's logging (warnings on every input would swamp the fuzzer's output).
void quiet_logs();

}  // namespace trainer::fuzz
