#pragma once
// What the checkpoint writer and reader agree on (docs/checkpoint.md).
#include <string>

namespace trainer::checkpoint_format {

inline constexpr const char* kFormat = "trainer-checkpoint";  ///< Root attribute 'trainer_format'.
inline constexpr long long kVersion = 1;                      ///< Root attribute 'format_version'.

/// A layer, weight, log or state name: one HDF5 path component.
inline bool valid_name(const std::string& s) { return !s.empty() && s != "." && s.find('/') == std::string::npos; }

}  // namespace trainer::checkpoint_format
