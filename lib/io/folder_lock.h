#pragma once
// One training run at a time in an output folder: an advisory lock (flock(2))
// on <folder>/.trainer.lock, held while the run trains and released by the
// system when the process ends however it ends.
#include <string>

namespace trainer {

/// For writers that leave no file of their own beside their outputs
/// (predict): an flock(2) on the folder itself, held while the object lives.
/// Throws UserError naming dir when another process holds it (what: the
/// writer, e.g. "predict", for the message), or when dir cannot be opened; a
/// file system without locks is not an error.
class DirectoryLock {
 public:
  DirectoryLock(const std::string& dir, const std::string& what);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

class FolderLock {
 public:
  /// Creates folder dir (and its parents) and locks dir/.trainer.lock, which
  /// then names this process ("pid <pid> on host <host>"). Throws UserError
  /// naming dir and the holder when another process holds the lock (another
  /// run trains there: both would write the same last.h5 and log.csv), or
  /// when dir or the lock file cannot be made. A file system without locks
  /// (flock fails with ENOLCK, EOPNOTSUPP or ENOSYS) is not an error: the run goes on
  /// unlocked.
  explicit FolderLock(const std::string& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace trainer
