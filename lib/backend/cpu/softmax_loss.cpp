// The categorical (softmax) cross-entropy's sum and gradient (plain, smoothed or focal), the confusion
// counts of its metrics and the channel softmax on the CPU (OpenMP over the
// pixels), per pixel through backend/train_math.h.
#include <vector>

#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cpu {

void softmax_loss_sum(const Device&, const float* z, const float* y, size_t n, int k, CrossEntropyForm f,
                      double* sum_host) {
  double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (size_t i = 0; i < n; ++i) sum += softmax_loss_term(z + i * size_t(k), k, class_index(y[i], k), f);
  *sum_host = sum;
}

void softmax_loss_grad(const Device&, const float* z, const float* y, size_t n, int k, CrossEntropyForm f,
                       float scale, float* g) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i)
    softmax_loss_term_grad(z + i * size_t(k), k, class_index(y[i], k), f, scale, g + i * size_t(k));
}

void class_confusion(const Device&, const float* z, const float* y, size_t n, int k, int64_t* confusion_host) {
  const size_t bins = size_t(k) * size_t(k);
  std::vector<int64_t> counts(bins, 0);
  int64_t* c = counts.data();
#pragma omp parallel for reduction(+ : c[:bins]) schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const int t = class_index(y[i], k);
    if (t >= 0) c[size_t(t) * size_t(k) + size_t(argmax_class(z + i * size_t(k), k))] += 1;
  }
  for (size_t b = 0; b < bins; ++b) confusion_host[b] += counts[b];
}

void softmax_channels(const Device&, float* x, size_t n, int k) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) softmax_in_place(x + i * size_t(k), k);
}

}  // namespace trainer::cpu
