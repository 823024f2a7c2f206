#pragma once
// Atomic output files: written under a temporary name in the destination's
// folder, then rename()d over the destination, so a reader sees the previous
// file or the complete new one, never a half-written one.
#include <opencv2/core.hpp>
#include <string>

namespace trainer {

/// The temporary name of dest: "<dest>.tmp-<pid>" (same folder, so rename is atomic).
std::string temp_path(const std::string& dest);

/// While alive, names tmp as the temporary file this process is writing, so
/// that remove_pending_temp() (called by the second-SIGINT handler, which
/// exits at once) can delete it instead of leaving a half-written file. One
/// file at a time: a second PendingTemp while one is alive registers nothing.
class PendingTemp {
 public:
  explicit PendingTemp(const std::string& tmp);
  ~PendingTemp();
  PendingTemp(const PendingTemp&) = delete;
  PendingTemp& operator=(const PendingTemp&) = delete;

 private:
  bool registered_ = false;
};

/// Deletes the file a live PendingTemp names, if any. Async-signal-safe
/// (unlink(2) on a preallocated path).
void remove_pending_temp() noexcept;

/// Renames tmp over dest. On failure removes tmp and throws UserError naming
/// dest, the errno text and the fix (a writable folder).
void commit_temp(const std::string& tmp, const std::string& dest);

/// Checks, before any work, that files can be created in folder dir or, when
/// it does not exist yet, in its nearest existing parent (where it would be
/// created), by creating and removing a file there: a read-only folder or
/// file system is then found at once, not after the first epoch. Throws
/// UserError "cannot write in <what> '<dir>': <reason>; <fix>", or "cannot
/// create <what> '<dir>' in '<parent>': ..." when dir is still to be made.
void check_writable_folder(const std::string& dir, const std::string& what, const std::string& fix);

/// Checks, before any work, that dest could be written: its folder (the
/// working directory for a bare file name) exists and dest is not a folder.
/// Throws UserError "<flag>: ..." naming the folder and the fix (for a
/// folder, a file in it named example, e.g. "scores.csv").
void check_output_path(const std::string& dest, const std::string& flag, const std::string& example);

/// Writes bytes to dest atomically (temp_path + commit_temp). Throws UserError
/// naming the file when it cannot be written (missing or read-only folder, full disk).
void write_file_atomic(const std::string& dest, const std::string& bytes);

/// As write_file_atomic, with the data fsync(2)ed before the rename, so that
/// after a power loss dest holds the old file or the whole new one (for files
/// that are expensive to remake: exported models).
void write_file_durable(const std::string& dest, const std::string& bytes);

/// Encodes img (8- or 16-bit, 1, 3 or 4 channels, BGR order as cv::imwrite
/// takes it) as PNG and writes it to dest atomically (temp_path + commit_temp).
/// Throws InternalError when OpenCV cannot encode img, UserError naming the
/// file when it cannot be written (missing or read-only folder, full disk).
void write_png_atomic(const std::string& dest, const cv::Mat& img);

/// As write_png_atomic, as TIFF: img may also be float32 (CV_32F; OpenCV
/// writes it uncompressed as 32-bit IEEE samples).
void write_tiff_atomic(const std::string& dest, const cv::Mat& img);

}  // namespace trainer
