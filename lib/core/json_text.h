#pragma once
// JSON text for the --log-format json lines: string literals and numbers.
#include <string>

namespace trainer {

/// s as a JSON string literal: quotes, backslashes and control characters
/// escaped, and each byte that is not part of valid UTF-8 (a file name in
/// another encoding) replaced by U+FFFD, so that the line stays valid JSON.
std::string json_string(const std::string& s);

/// x with 9 significant digits, or null when it is NaN or infinite (JSON has
/// no such numbers).
std::string json_number(double x);

}  // namespace trainer
