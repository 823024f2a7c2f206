#pragma once
// A hash of bytes that is the same on every host and build (std::hash is
// not), for comparing what several processes read.
#include <cstdint>
#include <string_view>

namespace trainer {

/// 64-bit FNV-1a of bytes, continuing from h (the offset basis by default).
/// Source: Fowler, Noll, Vo, http://www.isthe.com/chongo/tech/comp/fnv/
inline uint64_t fnv1a(std::string_view bytes, uint64_t h = 14695981039346656037ull) {
  for (const char c : bytes) h = (h ^ uint64_t(static_cast<unsigned char>(c))) * 1099511628211ull;
  return h;
}

}  // namespace trainer
