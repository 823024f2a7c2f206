#pragma once
// Values sent from an isolated child to its caller (core/isolated_call.h):
// numbers in the machine's own layout (both ends are one program), arrays
// and strings as a uint64 count, then their items. What receives a count
// checks it against what the child may still send before allocating.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/isolated_call.h"

namespace trainer::wire {

template <class T>
void put(ChildSink& sink, T value) {
  static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>);
  sink.write(&value, sizeof value);
}

template <class T>
T take(ChildOutput& in) {
  static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>);
  T value{};
  in.read(&value, sizeof value);
  return value;
}

/// A count of items of item_bytes each (at least 1), refused when more than the child may still send.
inline uint64_t take_count(ChildOutput& in, size_t item_bytes) {
  const uint64_t n = take<uint64_t>(in);
  in.check_room(n > SIZE_MAX / item_bytes ? SIZE_MAX : size_t(n) * item_bytes);
  return n;
}

template <class T>
void put_array(ChildSink& sink, const std::vector<T>& values) {
  static_assert(std::is_arithmetic_v<T>);
  put<uint64_t>(sink, values.size());
  sink.write(values.data(), values.size() * sizeof(T));
}

template <class T>
std::vector<T> take_array(ChildOutput& in) {
  std::vector<T> values(take_count(in, sizeof(T)));
  in.read(values.data(), values.size() * sizeof(T));
  return values;
}

inline void put_text(ChildSink& sink, const std::string& text) {
  put<uint64_t>(sink, text.size());
  sink.write(text.data(), text.size());
}

inline std::string take_text(ChildOutput& in) {
  std::string text(take_count(in, 1), '\0');
  in.read(text.data(), text.size());
  return text;
}

}  // namespace trainer::wire
