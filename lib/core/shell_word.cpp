#include "core/shell_word.h"

#include <cstring>

namespace trainer {

std::string shell_word(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s)
    plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::strchr("_./:=@%+,-", c) != nullptr);
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string command_without_resume(const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--overwrite" || a.rfind("--resume=", 0) == 0 || a.rfind("--initial-weights=", 0) == 0) continue;
    if (a == "--resume" || a == "--initial-weights") {
      ++i;  // and its value
      continue;
    }
    out += (out.empty() ? "" : " ") + shell_word(a);
  }
  return out;
}

}  // namespace trainer
