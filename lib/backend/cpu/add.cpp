// Add (element-wise sum of k tensors, or one value per (sample, channel)
// added over the pixels, and its gradient) and gradient accumulation (fp32 or
// bf16) on the CPU (OpenMP).
#include "backend/cpu/sample_channel_fold.h"
#include "backend/device_ops.h"
#include "core/bf16.h"

namespace trainer::cpu {

namespace {

/// y <- bf16(y + x), the sum in fp32.
void accumulate_bf16(uint16_t* y, const uint16_t* x, size_t n) {
  const long long m = (long long)n;
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) y[i] = float_to_bf16(bf16_to_float(y[i]) + bf16_to_float(x[i]));
}

}  // namespace

void add_forward(const Device&, const float* const* xs, size_t k, float* y, size_t n) {
  const long long m = (long long)n;
  const float* a = xs[0];
  const float* b = xs[1];
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) y[i] = a[i] + b[i];
  for (size_t j = 2; j < k; ++j) {
    const float* c = xs[j];
#pragma omp parallel for simd schedule(static)
    for (long long i = 0; i < m; ++i) y[i] += c[i];
  }
}

void add_channels_forward(const Device&, const float* x, const float* s, Shape xs, float* y) {
  for_sample_channel_elements(xs, [=](size_t i, size_t row) { y[i] = x[i] + s[row]; });
}

void channel_sums(const Device&, const float* x, Shape xs, float* out) {
  fold_sample_channels(xs, 0.0, [x](double acc, size_t i) { return acc + double(x[i]); },
                       [out](size_t row, double sum) { out[row] = float(sum); });
}

void accumulate(const Device&, DType t, void* y_raw, const void* x_raw, size_t n) {
  if (t == DType::BF16) return accumulate_bf16(static_cast<uint16_t*>(y_raw), static_cast<const uint16_t*>(x_raw), n);
  float* y = static_cast<float*>(y_raw);
  const float* x = static_cast<const float*>(x_raw);
  const long long m = (long long)n;
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) y[i] += x[i];
}

}  // namespace trainer::cpu
