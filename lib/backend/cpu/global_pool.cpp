// GlobalAveragePooling2D and GlobalMaxPooling2D forward / backward on the
// CPU: OpenMP over (sample, block of channels), each (sample, channel)
// folded over its pixels in row-major order (backend/cpu/sample_channel_fold.h).
#include <limits>
#include <vector>

#include "backend/cpu/sample_channel_fold.h"
#include "backend/device_ops.h"

namespace trainer::cpu {

void global_avg_pool_forward(const Device&, const float* x, Shape xs, float* y) {
  const double pixels = double(xs.h) * xs.w;
  fold_sample_channels(xs, 0.0, [x](double acc, size_t i) { return acc + double(x[i]); },
                       [y, pixels](size_t row, double sum) { y[row] = float(sum / pixels); });
}

void global_avg_pool_backward(const Device&, const float* dy, Shape xs, float* dx) {
  const float pixels = float(xs.h) * float(xs.w);
  for_sample_channel_elements(xs, [=](size_t i, size_t row) { dx[i] = dy[row] / pixels; });
}

void global_max_pool_forward(const Device&, const float* x, Shape xs, float* y) {
  fold_sample_channels(xs, -std::numeric_limits<float>::infinity(),
                       [x](float acc, size_t i) { return max_keeping_nan(acc, x[i]); },
                       [y](size_t row, float m) { y[row] = m; });
}

void global_max_pool_backward(const Device&, const float* x, Shape xs, const float* y, const float* dy, float* dx) {
  std::vector<float> ties(size_t(xs.n) * size_t(xs.c));
  fold_sample_channels(xs, 0.0, [x, y, C = size_t(xs.c), HWC = xs.sample_numel()](double k, size_t i) {
    return k + (x[i] == y[sample_channel_row(i, HWC, C)] ? 1.0 : 0.0);
  }, [&ties](size_t row, double k) { ties[row] = float(k); });
  const float* k = ties.data();
  for_sample_channel_elements(xs, [=](size_t i, size_t row) { dx[i] = x[i] == y[row] ? dy[row] / k[row] : 0.f; });
}

}  // namespace trainer::cpu
