#include "core/sanitizer_verdict.h"

#include <unistd.h>

#include <cstring>
#include <string>

// Present in a build with sanitizers; weak, so null otherwise.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));
extern "C" void __asan_set_error_report_callback(void (*callback)(const char*)) __attribute__((weak));

namespace trainer {

namespace {

constexpr int kOutOfMemoryExit = 85;
constexpr int kLibraryFaultExit = 86;
constexpr int kOwnFaultExit = 87;

/// Whether the first frame of a report's first stack outside the sanitizer and the C and C++ runtime
/// libraries (which our code calls too) is in a system library: "#2 0x7f... (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x190f18)" or
/// "#0 0x7f... in H5O__attr_exists (/usr/lib/...)"; frames of our code name a source file instead.
bool library_frame_first(const char* report) {
  for (const char* line = report; line && *line;) {
    const char* end = std::strchr(line, '\n');
    const std::string text(line, end ? size_t(end - line) : std::strlen(line));
    line = end ? end + 1 : nullptr;
    const size_t hash = text.find_first_not_of(' ');
    if (hash == std::string::npos || text.compare(hash, 1, "#") != 0 || text.find(" 0x", hash) == std::string::npos)
      continue;
    const auto has = [&](const char* part) { return text.find(part) != std::string::npos; };
    if (has(" in __asan") || has(" in __interceptor") || has(" in __sanitizer") || has(" in __ubsan") ||
        has("sysdeps/") || has("/libc.so") || has("/libstdc++.so"))
      continue;
    if (has("(/usr/lib/") || has("(/lib/")) return true;
    // A frame of the binary itself with no source line ("in memcpy (/build/unit_tests+0xe59b43)") is the
    // sanitizer's runtime linked into it (our code, built with debug information, names its file and line).
    if (has("+0x") && has(" (/")) continue;
    return false;
  }
  return false;
}

int g_exit = kOwnFaultExit;  // set by the report, used by the death that follows it

}  // namespace

SanitizerVerdict verdict_of_report(const char* report) {
  // "allocator is out of memory trying to allocate", "requested allocation size ... exceeds maximum"
  const char* error = std::strstr(report, "ERROR: AddressSanitizer: ");
  const char* line_end = error ? std::strchr(error, '\n') : nullptr;
  const std::string line = error ? std::string(error, line_end ? size_t(line_end - error) : std::strlen(error)) : "";
  const bool memory = line.find("out of memory") != std::string::npos ||
                      line.find("allocation-size-too-big") != std::string::npos ||
                      line.find("requested allocation size") != std::string::npos;
  return memory                        ? SanitizerVerdict::out_of_memory
         : library_frame_first(report) ? SanitizerVerdict::library_fault
                                       : SanitizerVerdict::own_fault;
}

namespace {

void on_report(const char* report) {
  const SanitizerVerdict v = verdict_of_report(report);
  g_exit = v == SanitizerVerdict::out_of_memory   ? kOutOfMemoryExit
           : v == SanitizerVerdict::library_fault ? kLibraryFaultExit
                                                  : kOwnFaultExit;
}

void on_death() { _exit(g_exit); }

}  // namespace

bool end_child_by_sanitizer_verdict() {
  if (!kSanitizedBuild || !__sanitizer_set_death_callback || !__asan_set_error_report_callback) return false;
  __asan_set_error_report_callback(on_report);
  __sanitizer_set_death_callback(on_death);
  return true;
}

SanitizerVerdict sanitizer_verdict(int exit_status) {
  if (!kSanitizedBuild) return SanitizerVerdict::none;
  switch (exit_status) {
    case kOutOfMemoryExit: return SanitizerVerdict::out_of_memory;
    case kLibraryFaultExit: return SanitizerVerdict::library_fault;
    case kOwnFaultExit: return SanitizerVerdict::own_fault;
    default: return SanitizerVerdict::none;
  }
}

}  // namespace trainer
