// Multiply (element-wise product of two tensors, the second one optionally
// one channel broadcast over all, or one scale per (sample, channel)
// broadcast over the pixels) and its gradients on the CPU (OpenMP over
// pixels, or over (sample, block of channels) for the scales' gradient).
#include "backend/cpu/sample_channel_fold.h"
#include "backend/device_ops.h"

namespace trainer::cpu {

void multiply_forward(const Device&, const float* a, const float* b, int cb, long long P, int C, float* y) {
  const bool broadcast = cb == 1 && C > 1;
#pragma omp parallel for schedule(static)
  for (long long p = 0; p < P; ++p)
    for (int c = 0; c < C; ++c) {
      const long long i = p * C + c;
      y[i] = a[i] * b[broadcast ? p : i];
    }
}

void multiply_backward(const Device&, const float* a, const float* b, int cb, long long P, int C, const float* dy,
                       float* da, float* db) {
  const bool broadcast = cb == 1 && C > 1;
#pragma omp parallel for schedule(static)
  for (long long p = 0; p < P; ++p) {
    float sum = 0.f;
    for (int c = 0; c < C; ++c) {
      const long long i = p * C + c;
      if (da) da[i] = dy[i] * b[broadcast ? p : i];
      if (db && !broadcast) db[i] = dy[i] * a[i];
      if (db && broadcast) sum += dy[i] * a[i];
    }
    if (db && broadcast) db[p] = sum;
  }
}

void scale_channels_forward(const Device&, const float* x, const float* s, Shape xs, float* y) {
  for_sample_channel_elements(xs, [=](size_t i, size_t row) { y[i] = x[i] * s[row]; });
}

void scale_channels_backward(const Device&, const float* x, const float* s, Shape xs, const float* dy, float* dx,
                             float* ds) {
  if (dx) for_sample_channel_elements(xs, [=](size_t i, size_t row) { dx[i] = dy[i] * s[row]; });
  if (ds)
    fold_sample_channels(xs, 0.0, [=](double acc, size_t i) { return acc + double(dy[i]) * double(x[i]); },
                         [ds](size_t row, double sum) { ds[row] = float(sum); });
}

}  // namespace trainer::cpu
