#include "io/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace trainer {

namespace {

/// flock(2) of fd, exclusive, without waiting. 0 when held, or when the file system has no locks (ENOLCK,
/// EOPNOTSUPP, EINVAL, ENOSYS: the caller goes on unlocked, as before locks were taken); else the errno
/// (EWOULDBLOCK: another process holds it).
int try_lock(int fd) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
  const int err = errno;
  return err == ENOLCK || err == EOPNOTSUPP || err == EINVAL || err == ENOSYS ? 0 : err;
}

}  // namespace

FolderLock::FolderLock(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = (std::filesystem::path(dir) / ".trainer.lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw UserError("cannot create '" + path + "': " + std::strerror(errno) +
                    "; check that the output folder is writable");
  if (const int err = try_lock(fd_); err != 0) {
    char holder[256] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK)
      throw UserError("cannot lock '" + path + "': " + std::strerror(err) + "; check the output folder");
    throw UserError("output folder '" + dir + "' is in use by another training run (" +
                    (n > 0 ? std::string(holder, size_t(n)) : std::string("its process")) +
                    "), which writes the same last.h5 and log.csv: wait for it to end or stop it, or choose "
                    "another --output");
  }
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me = "pid " + std::to_string(::getpid()) + " on host " + host;
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, me.data(), me.size(), 0);
}

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& what) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) throw UserError("cannot open the output folder '" + dir + "': " + std::strerror(errno));
  const int err = try_lock(fd_);
  if (err == 0) return;
  ::close(fd_);
  fd_ = -1;
  if (err != EWOULDBLOCK)
    throw UserError("cannot lock the output folder '" + dir + "': " + std::strerror(err) + "; check the folder");
  throw UserError("output folder '" + dir + "' is being written by another " + what + ", whose files this one " +
                  "would mix with its own: wait for it to end, or choose another --output");
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace trainer
