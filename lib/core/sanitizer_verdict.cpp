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

/// Whether the first frame of a report outside the sanitizer itself is in a system library
/// ("#0 0x7f... in H5O__attr_exists (/usr/lib/x86_64-linux-gnu/...)"); frames of our code name a source file.
bool library_frame_first(const char* report) {
  for (const char* line = report; line && *line;) {
    const char* end = std::strchr(line, '\n');
    const std::string text(line, end ? size_t(end - line) : std::strlen(line));
    line = end ? end + 1 : nullptr;
    const size_t hash = text.find_first_not_of(' ');
    if (hash == std::string::npos || text[hash] != '#' || text.find(" in ") == std::string::npos) continue;
    if (text.find(" in __asan") != std::string::npos || text.find(" in __interceptor") != std::string::npos ||
        text.find(" in __sanitizer") != std::string::npos || text.find(" in __ubsan") != std::string::npos)
      continue;
    return text.find("(/usr/lib/") != std::string::npos || text.find("(/lib/") != std::string::npos;
  }
  return false;
}

int g_exit = kOwnFaultExit;  // set by the report, used by the death that follows it

void on_report(const char* report) {
  // "allocator is out of memory trying to allocate", "requested allocation size ... exceeds maximum"
  const char* error = std::strstr(report, "ERROR: AddressSanitizer: ");
  const char* line_end = error ? std::strchr(error, '\n') : nullptr;
  const std::string line = error ? std::string(error, line_end ? size_t(line_end - error) : std::strlen(error)) : "";
  const bool memory = line.find("out of memory") != std::string::npos ||
                      line.find("allocation-size-too-big") != std::string::npos ||
                      line.find("requested allocation size") != std::string::npos;
  g_exit = memory ? kOutOfMemoryExit : library_frame_first(report) ? kLibraryFaultExit : kOwnFaultExit;
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
