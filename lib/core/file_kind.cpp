#include "core/file_kind.h"

#include <sys/stat.h>

#include "core/error.h"

namespace trainer {

std::string special_file_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "a folder";
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  return "a socket";
}

void require_plain_file(const std::string& path, const std::string& what, const std::string& fix) {
  if (const std::string kind = special_file_kind(path); !kind.empty())
    throw UserError(what + " '" + path + "' is " + kind + ", not a file; " + fix);
}

}  // namespace trainer
