#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <vector>

#include "core/error.h"
#include "core/file_kind.h"

namespace trainer {

namespace fs = std::filesystem;

namespace {

// The pending temporary file: its path, whether a PendingTemp owns the slot,
// whether the path is set, and a sequence number, odd while the path is being
// written, so that the signal handler (any thread) never unlinks a torn path.
char g_pending[4096];
std::atomic<bool> g_claimed{false}, g_ready{false};
std::atomic<unsigned> g_sequence{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<unsigned>::is_always_lock_free,
              "read by a signal handler");

}  // namespace

PendingTemp::PendingTemp(const std::string& tmp) {
  if (tmp.size() >= sizeof g_pending) return;
  bool expected = false;
  if (!g_claimed.compare_exchange_strong(expected, true)) return;  // another write is pending
  g_sequence.fetch_add(1);  // odd: being written
  std::memcpy(g_pending, tmp.c_str(), tmp.size() + 1);
  g_sequence.fetch_add(1);
  g_ready.store(true);
  registered_ = true;
}

PendingTemp::~PendingTemp() {
  if (!registered_) return;
  g_ready.store(false);
  g_claimed.store(false);
}

void remove_pending_temp() noexcept {
  if (!g_ready.load()) return;
  const unsigned before = g_sequence.load();
  if (before & 1u) return;
  char path[sizeof g_pending];
  std::memcpy(path, g_pending, sizeof path);  // memcpy is async-signal-safe (POSIX.1-2016)
  path[sizeof path - 1] = '\0';
  if (g_sequence.load() != before || !g_ready.load()) return;  // replaced meanwhile: not ours to remove
  ::unlink(path);  // after the rename the name is gone: ENOENT, nothing finished is removed
}

std::string temp_path(const std::string& dest) { return dest + ".tmp-" + std::to_string(::getpid()); }

void commit_temp(const std::string& tmp, const std::string& dest) {
  std::error_code ec;
  fs::rename(tmp, dest, ec);
  if (ec) {
    const std::string reason = ec.message();  // before remove() reuses ec
    fs::remove(tmp, ec);
    throw UserError("cannot write '" + dest + "': " + reason + "; check that the output folder is writable");
  }
}

void check_writable_folder(const std::string& dir, const std::string& what, const std::string& fix) {
  std::error_code ec;
  fs::path folder = fs::absolute(dir, ec);
  while (!fs::exists(folder, ec) && folder.has_parent_path() && folder != folder.parent_path())
    folder = folder.parent_path();
  if (!fs::is_directory(folder, ec)) return;  // a file in the way: creating the folder names it
  const fs::path probe = folder / (".trainer-write-test-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno != EEXIST) {  // EEXIST: a probe of a killed process of this pid, in a writable folder
    const int err = errno;
    const bool made_here = fs::path(dir) != folder && fs::absolute(dir, ec) != folder;  // dir is still to be made
    throw UserError("cannot " + (made_here ? "create " + what + " '" + dir + "' in '" + folder.string() + "'"
                                           : "write in " + what + " '" + folder.string() + "'") +
                    ": " + std::strerror(err) + "; " + fix);
  }
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
}

void check_output_path(const std::string& dest, const std::string& flag, const std::string& example) {
  std::error_code ec;
  const fs::path parent = fs::path(dest).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    throw UserError(flag + ": folder '" + parent.string() + "' of '" + dest + "' " +
                    (fs::exists(parent, ec) ? "is not a folder" : "does not exist") + "; create it or fix the path");
  if (fs::is_directory(dest, ec))
    throw UserError(flag + ": '" + dest + "' is a folder; name the file to write, e.g. " +
                    (fs::path(dest) / example).string());
  require_plain_file(dest, flag, "name a file to write, e.g. " + example);
}

namespace {

/// Writes bytes to tmp (made or truncated), fsync(2)ing it when durable, then
/// commit_temp(tmp, dest). UserError naming dest, the step and the errno text.
void write_then_commit(const std::string& dest, const std::string& tmp, const std::string& bytes, bool durable) {
  auto fail = [&](const std::string& step, int fd, int err) {
    if (fd >= 0) ::close(fd);
    std::remove(tmp.c_str());
    throw UserError("cannot write '" + dest + "': " + step + " '" + tmp + "': " + std::strerror(err) +
                    "; check that the output folder exists, is writable and has space");
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw UserError("cannot write '" + dest + "': " + std::strerror(err) +
                    "; check that the output folder exists and is writable");
  }
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("writing", fd, errno);
    done += size_t(n);
  }
  if (durable && ::fsync(fd) != 0) fail("syncing", fd, errno);
  if (::close(fd) != 0) fail("closing", -1, errno);
  commit_temp(tmp, dest);
}

}  // namespace

void write_file_atomic(const std::string& dest, const std::string& bytes) {
  const std::string tmp = temp_path(dest);
  const PendingTemp pending(tmp);
  write_then_commit(dest, tmp, bytes, false);
}

void write_file_durable(const std::string& dest, const std::string& bytes) {
  const std::string tmp = temp_path(dest);
  const PendingTemp pending(tmp);
  write_then_commit(dest, tmp, bytes, true);
}

namespace {

/// Encodes img with OpenCV's encoder for ext (".png", ".tif") and writes it
/// to dest atomically; InternalError naming format when it cannot encode img.
void write_encoded_atomic(const std::string& dest, const cv::Mat& img, const char* ext, const char* format) {
  std::vector<uchar> bytes;
  bool encoded = false;
  try {
    encoded = cv::imencode(ext, img, bytes);
  } catch (const cv::Exception&) {
    encoded = false;
  }
  if (!encoded) throw InternalError("cannot encode '" + dest + "' as " + format);
  write_file_atomic(dest, std::string(bytes.begin(), bytes.end()));
}

}  // namespace

void write_png_atomic(const std::string& dest, const cv::Mat& img) { write_encoded_atomic(dest, img, ".png", "PNG"); }

void write_tiff_atomic(const std::string& dest, const cv::Mat& img) {
  write_encoded_atomic(dest, img, ".tif", "TIFF");
}

}  // namespace trainer
