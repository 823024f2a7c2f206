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

/// Raised when a device or library call fails for reasons the user did not cause.
class InternalError : public std::runtime_error {
 public:
  explicit InternalError(const std::string& msg) : std::runtime_error(msg) {}
};

}  // namespace trainer
