// Cropping2D's window copy and its inverse on the CPU (OpenMP over the
// window's rows, one memcpy per row).
#include <cstring>

#include "backend/device_ops.h"

namespace trainer::cpu {

namespace {

/// Bytes of one image row of w pixels of c channels of type t.
size_t row_bytes(DType t, int w, int c) { return size_t(w) * size_t(c) * dtype_size(t); }

}  // namespace

void crop_forward(const Device&, DType t, const void* x, Shape xs, Crop2DParams p, void* y) {
  const int ho = xs.h - p.top - p.bottom, wo = xs.w - p.left - p.right;
  const size_t in_row = row_bytes(t, xs.w, xs.c), out_row = row_bytes(t, wo, xs.c), skip = row_bytes(t, p.left, xs.c);
  const char* src = static_cast<const char*>(x);
  char* dst = static_cast<char*>(y);
  const long long rows = (long long)xs.n * ho;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const long long n = r / ho, i = r % ho;
    std::memcpy(dst + size_t(r) * out_row, src + size_t(n * xs.h + p.top + i) * in_row + skip, out_row);
  }
}

void crop_backward(const Device&, DType t, const void* dy, Shape xs, Crop2DParams p, void* dx) {
  const int ho = xs.h - p.top - p.bottom, wo = xs.w - p.left - p.right;
  const size_t in_row = row_bytes(t, xs.w, xs.c), out_row = row_bytes(t, wo, xs.c), skip = row_bytes(t, p.left, xs.c);
  const char* src = static_cast<const char*>(dy);
  char* dst = static_cast<char*>(dx);
  const long long rows = (long long)xs.n * xs.h;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < rows; ++r) {
    char* row = dst + size_t(r) * in_row;
    const long long i = r % xs.h - p.top;
    if (i < 0 || i >= ho) {
      std::memset(row, 0, in_row);
      continue;
    }
    std::memset(row, 0, skip);
    std::memcpy(row + skip, src + size_t(r / xs.h * ho + i) * out_row, out_row);
    std::memset(row + skip + out_row, 0, in_row - skip - out_row);
  }
}

}  // namespace trainer::cpu
