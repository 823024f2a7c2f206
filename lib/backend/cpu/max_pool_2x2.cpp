#include "backend/cpu/max_pool_2x2.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/bf16.h"

namespace trainer::cpu {

namespace {

inline float value(float v) { return v; }
inline float value(uint16_t bits) { return bf16_to_float(bits); }

/// v where keep, else +0: a mask on the bits, which vectorizes where a
/// select between v and 0 would stay a branch.
inline float keep(float v, bool keep) {
  uint32_t u = 0;
  std::memcpy(&u, &v, sizeof u);
  u &= 0u - uint32_t(keep);
  std::memcpy(&v, &u, sizeof v);
  return v;
}
inline uint16_t keep(uint16_t bits, bool keep) { return uint16_t(bits & (0u - unsigned(keep))); }

/// q where it is larger than p or NaN, else p: a NaN in a window wins, as
/// in the GPU kernel.
template <class T>
inline T larger(T p, T q) {
  const float vp = value(p), vq = value(q);
  return (vq > vp || vq != vq) ? q : p;
}

/// out[c] <- the largest of the window's four pixels (top row: a, b; bottom
/// row: d, e), channel by channel; the bits of one of them, so exact.
template <class T>
inline void window_max(const T* __restrict top, const T* __restrict bottom, size_t C, T* __restrict out) {
  for (size_t c = 0; c < C; ++c) out[c] = larger(larger(top[c], top[C + c]), larger(bottom[c], bottom[C + c]));
}

/// The window's four gradients: g at the first of a, b, d, e equal to m, 0 elsewhere.
template <class T>
inline void window_grad(const T* __restrict top, const T* __restrict bottom, const T* __restrict y,
                        const T* __restrict dy, size_t C, T* __restrict dtop, T* __restrict dbottom) {
  for (size_t c = 0; c < C; ++c) {
    const float m = value(y[c]);
    const T g = dy[c];
    // Bitwise, not short-circuit, logic: no branches, so the loop vectorizes.
    const bool ea = value(top[c]) == m, eb = value(top[C + c]) == m;
    const bool ed = value(bottom[c]) == m, ee = value(bottom[C + c]) == m;
    dtop[c] = keep(g, ea);
    dtop[C + c] = keep(g, eb & !ea);
    dbottom[c] = keep(g, ed & !(ea | eb));
    dbottom[C + c] = keep(g, ee & !(ea | eb | ed));
  }
}

/// Offset in x of output row r's (r = n * Ho + oh) first input row, 2 * oh of sample n.
inline size_t window_rows(const Pool2x2Tensors& s, long long r) {
  return (size_t(r / s.ys.h) * size_t(s.xs.h) + 2 * size_t(r % s.ys.h)) * size_t(s.xs.w) * size_t(s.xs.c);
}

template <class T>
void forward(const Pool2x2Tensors& s, const T* x, T* y) {
  const size_t C = size_t(s.xs.c), in_row = size_t(s.xs.w) * C, out_row = size_t(s.ys.w) * C;
  const long long rows = (long long)s.ys.n * s.ys.h;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const T* top = x + window_rows(s, r);
    T* out = y + size_t(r) * out_row;
    for (size_t ow = 0; ow < size_t(s.ys.w); ++ow) window_max(top + 2 * ow * C, top + in_row + 2 * ow * C, C, out + ow * C);
  }
}

template <class T>
void backward(const Pool2x2Tensors& s, const T* x, const T* y, const T* dy, T* dx) {
  const size_t C = size_t(s.xs.c), in_row = size_t(s.xs.w) * C, out_row = size_t(s.ys.w) * C;
  const long long rows = (long long)s.ys.n * s.ys.h;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const size_t first = window_rows(s, r);
    const T *top = x + first, *ys = y + size_t(r) * out_row, *dys = dy + size_t(r) * out_row;
    T* dtop = dx + first;
    for (size_t ow = 0; ow < size_t(s.ys.w); ++ow)
      window_grad(top + 2 * ow * C, top + in_row + 2 * ow * C, ys + ow * C, dys + ow * C, C, dtop + 2 * ow * C,
                  dtop + in_row + 2 * ow * C);
    const size_t covered = 2 * out_row;  // an odd last column is in no window
    std::fill(dtop + covered, dtop + in_row, T(0));
    std::fill(dtop + in_row + covered, dtop + 2 * in_row, T(0));
  }
  if (s.xs.h % 2 == 0) return;
  for (int n = 0; n < s.xs.n; ++n) {  // an odd last row is in no window
    T* last = dx + (size_t(n) * size_t(s.xs.h) + size_t(s.xs.h - 1)) * in_row;
    std::fill(last, last + in_row, T(0));
  }
}

}  // namespace

bool max_pool_2x2_applies(const Pool2DParams& p, Shape xs, Shape ys) {
  // An output of half the input (rounded down) needs no padding: (H / 2 - 1) * 2 + 2 <= H.
  return p.ph == 2 && p.pw == 2 && p.stride_h == 2 && p.stride_w == 2 && ys.h == xs.h / 2 && ys.w == xs.w / 2 &&
         ys.n == xs.n && ys.c == xs.c;
}

void max_pool_2x2_forward(const Pool2x2Tensors& s, const void* x, void* y) {
  if (s.t == DType::BF16) return forward(s, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y));
  forward(s, static_cast<const float*>(x), static_cast<float*>(y));
}

void max_pool_2x2_backward(const Pool2x2Tensors& s, const void* x, const void* y, const void* dy, void* dx) {
  if (s.t == DType::BF16)
    return backward(s, static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(y),
                    static_cast<const uint16_t*>(dy), static_cast<uint16_t*>(dx));
  backward(s, static_cast<const float*>(x), static_cast<const float*>(y), static_cast<const float*>(dy),
           static_cast<float*>(dx));
}

}  // namespace trainer::cpu
