#pragma once
// bfloat16 on the host: the top 16 bits of an IEEE binary32 (8-bit exponent,
// 7-bit mantissa), as core/dtype.h's DType::BF16 stores it.
#include <cstdint>
#include <cstring>

namespace trainer {

/// The bf16 bits of v rounded to nearest even, as CUDA's __float2bfloat16_rn:
/// the top 16 bits of v's binary32 after adding 0x7fff plus the lowest kept
/// bit (so a finite value beyond bf16's largest rounds to infinity). NaN
/// stays NaN (its sign and top mantissa bits kept, made quiet).
inline uint16_t float_to_bf16(float v) {
  uint32_t u = 0;
  std::memcpy(&u, &v, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // NaN: quiet, never rounded to inf
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

/// The float of bf16 bits h (exact: h becomes the top 16 bits of a binary32).
inline float bf16_to_float(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float v = 0;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

/// v rounded to the nearest bf16 value (ties to even), as a float.
inline float round_bf16(float v) { return bf16_to_float(float_to_bf16(v)); }

}  // namespace trainer
