#pragma once
// Loops of the CPU's per (sample, channel) ops on NHWC tensors [N, H, W, C]
// (GlobalAveragePooling2D, GlobalMaxPooling2D, Multiply's and Add's
// [1, 1, C] inputs): OpenMP over (sample, block of channels). Internal to
// lib/backend/cpu.
#include <algorithm>
#include <cstddef>

#include "backend/elementwise_math.h"
#include "core/shape.h"

namespace trainer::cpu {

/// Channels one thread folds together (consecutive in memory, per pixel).
constexpr int kFoldChannels = 64;

/// For each (n, c) of s: acc = fold(... fold(fold(init, e_0), e_1) ..., e_last)
/// over the elements e of its H*W pixels in row-major order, then
/// done(n * C + c, acc). fold and done must be safe to call from several
/// threads for different (n, c).
template <class T, class Fold, class Done>
void fold_sample_channels(Shape s, T init, Fold fold, Done done) {
  const long long HW = (long long)s.h * s.w;
  const int C = s.c, blocks = (C + kFoldChannels - 1) / kFoldChannels;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int b = 0; b < blocks; ++b) {
      const int c0 = b * kFoldChannels, c1 = std::min(C, c0 + kFoldChannels);
      T acc[kFoldChannels];  // on the stack: nothing allocated per call
      std::fill(acc, acc + (c1 - c0), init);
      for (long long p = 0; p < HW; ++p) {
        const size_t base = (size_t(n) * size_t(HW) + size_t(p)) * size_t(C);
        for (int c = c0; c < c1; ++c) acc[c - c0] = fold(acc[c - c0], base + size_t(c));
      }
      for (int c = c0; c < c1; ++c) done(size_t(n) * size_t(C) + size_t(c), acc[c - c0]);
    }
}

/// f(e, row) for every element e of s, row = sample_channel_row(e): its (n, c)
/// in an [N, C] array (OpenMP over the elements).
template <class F>
void for_sample_channel_elements(Shape s, F f) {
  const size_t total = s.numel(), HWC = s.sample_numel(), C = size_t(s.c);
#pragma omp parallel for schedule(static)
  for (long long e = 0; e < (long long)total; ++e) f(size_t(e), sample_channel_row(size_t(e), HWC, C));
}

}  // namespace trainer::cpu
