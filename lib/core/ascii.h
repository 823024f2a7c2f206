#pragma once
// ASCII case folding for names, config keys and file extensions, independent
// of the C locale.
#include <string>

namespace trainer {

/// s with A-Z turned into a-z; every other byte (UTF-8 included) unchanged.
inline std::string ascii_lower(std::string s) {
  for (char& ch : s)
    if (ch >= 'A' && ch <= 'Z') ch = char(ch - 'A' + 'a');
  return s;
}

}  // namespace trainer
