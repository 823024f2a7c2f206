#pragma once
// Files written atomically: to "<dest>.tmp-<pid>" in the same folder, then
// renamed over dest, so a reader (or a crash) sees the old file or the whole
// new one, never a half-written one.
#include <opencv2/core.hpp>
#include <string>

namespace trainer {

/// Writes bytes to dest atomically. Throws UserError naming the file when the
/// temp file cannot be written or the rename fails (the temp file is removed).
void write_file_atomic(const std::string& dest, const std::string& bytes);

/// Encodes img (8U or 16U; 1, 3 BGR or 4 BGRA channels) as PNG and writes it
/// to dest atomically. Throws InternalError when OpenCV cannot encode img,
/// UserError as write_file_atomic.
void write_png_atomic(const cv::Mat& img, const std::string& dest);

}  // namespace trainer
