#pragma once
// What a user-named path is, found with stat(2) alone: a FIFO without a
// writer blocks whoever opens it, and a device such as /dev/zero or
// /dev/full reads without end, so such paths are refused by name before
// anything opens them.
#include <string>

namespace trainer {

/// "a folder", "a FIFO (named pipe)", "a character device", "a block device"
/// or "a socket" when path exists and is not a regular file (symbolic links
/// followed); "" for a regular file or a path that does not exist.
std::string special_file_kind(const std::string& path);

/// Throws UserError "<what> '<path>' is <kind>, not a file; <fix>" when
/// special_file_kind(path) is not "". Opens nothing.
void require_plain_file(const std::string& path, const std::string& what, const std::string& fix);

}  // namespace trainer
