#pragma once
// Error types. A UserError is something the user can fix (flags, config, data,
// paths, checkpoints): main prints its message on one line and exits with 2.
// Anything else escaping main is an internal error: exit code 1.
#include <stdexcept>
#include <string>

namespace trainer {

/// Raised for bad user input. The message names the file, the place and the fix.
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& msg) : std::runtime_error(msg) {}
};

/// A UserError of a run of several processes that world rank 0 has already
/// printed for all of them (throw_alike, check_together: a run of 64
/// processes prints an error they share once): run_guarded exits 2 and prints
/// nothing more.
class ReportedUserError : public UserError {
 public:
  explicit ReportedUserError(const std::string& msg) : UserError(msg) {}
};

/// Raised when a device or library call fails for reasons the user did not cause.
class InternalError : public std::runtime_error {
 public:
  explicit InternalError(const std::string& msg) : std::runtime_error(msg) {}
};

/// Raised when a GPU cannot provide memory. A UserError (exit 2): the fix is a
/// smaller batch_size or input, which the trainer adds to the message.
class DeviceOutOfMemory : public UserError {
 public:
  DeviceOutOfMemory(const std::string& msg, size_t requested, size_t in_use)
      : UserError(msg), requested_bytes(requested), in_use_bytes(in_use) {}
  size_t requested_bytes;  ///< The allocation that failed.
  size_t in_use_bytes;     ///< What the tower's allocator held at that moment.
};

}  // namespace trainer
