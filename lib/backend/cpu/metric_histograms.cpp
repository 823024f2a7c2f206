// The metrics' histograms on the CPU (one OpenMP pass each with an array
// reduction), the bin of each value through backend/train_math.h.
#include <vector>

#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cpu {

namespace {

/// hist_host[(y[i] > 0.5) * class_bins + bin_of(z[i])] += 1 for i < n.
template <class BinOf>
void histogram(const float* z, const float* y, size_t n, int class_bins, BinOf bin_of, int64_t* hist_host) {
  thread_local std::vector<int64_t> counts;  // per tower thread: no allocation once sized
  counts.assign(size_t(2) * size_t(class_bins), 0);
  int64_t* h = counts.data();
  const int bins = 2 * class_bins;
#pragma omp parallel for reduction(+ : h[:bins]) schedule(static)
  for (size_t i = 0; i < n; ++i) h[(y[i] > 0.5f) * class_bins + bin_of(z[i])] += 1;
  for (int k = 0; k < bins; ++k) hist_host[k] += h[k];
}

}  // namespace

void logit_histogram(const Device&, const float* z, const float* y, size_t n, const float* thr_host,
                     int64_t* hist_host) {
  constexpr int T = kLogitThresholds;
  float thr[T];
  for (int t = 0; t < T; ++t) thr[t] = thr_host[t];
  histogram(z, y, n, T + 1, [&thr](float v) { return logit_bin(v, thr, T); }, hist_host);
}

void probability_histogram(const Device&, const float* z, const float* y, size_t n, int bins, int64_t* hist_host) {
  histogram(z, y, n, bins, [bins](float v) { return probability_bucket(v, bins); }, hist_host);
}

}  // namespace trainer::cpu
