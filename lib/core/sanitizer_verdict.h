#pragma once
// Whose fault a sanitizer's report in an isolated child (core/isolated_call.h)
// is: with AddressSanitizer built in, the child's report ends it with an exit
// status that says whether an allocation went past its memory limit, a system
// library (libhdf5) faulted, or our own code did. Without sanitizers there
// are no reports, and every exit status is its own.
namespace trainer {

/// True in a build with AddressSanitizer (scripts/sanitizers.sh).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

enum class SanitizerVerdict {
  none,           ///< No report: the exit status is the child's own.
  out_of_memory,  ///< An allocation past the child's memory limit.
  library_fault,  ///< A memory error whose faulting frame is in a system library.
  own_fault,      ///< Anything else: a defect of ours.
};

/// The verdict on a sanitizer's report text (AddressSanitizer's): an
/// allocation past the limit ("out of memory", "allocation-size-too-big"),
/// or whose code faulted, by the first frame of its first stack outside the
/// sanitizer and the C and C++ runtime libraries.
SanitizerVerdict verdict_of_report(const char* report);

/// In a forked child, in a sanitized build: makes a report end the child
/// with the status for its verdict (its report still printed). Returns
/// false where that cannot be done (no sanitizer).
bool end_child_by_sanitizer_verdict();

/// The verdict an exit status of such a child stands for; none in a build
/// without sanitizers.
SanitizerVerdict sanitizer_verdict(int exit_status);

}  // namespace trainer
