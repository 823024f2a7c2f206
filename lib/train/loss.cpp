#include "train/loss.h"

#include <stdexcept>

#include "train/elementwise.h"

namespace trainer {

LossKind loss_kind(const std::string& name) {
  if (name == "binary_crossentropy") return LossKind::BinaryCrossentropy;
  if (name == "dice") return LossKind::Dice;
  if (name == "bce_dice") return LossKind::BceDice;
  throw std::invalid_argument("unknown loss '" + name + "' (known: binary_crossentropy, dice, bce_dice)");
}

namespace {

/// Per-sample sums of one image: BCE sum, sum(p*y), sum(p), sum(y).
struct SampleSums {
  double bce = 0, py = 0, p = 0, y = 0;
};

SampleSums sample_sums(const float* z, const float* y, size_t m, bool need_bce, bool need_dice) {
  double bce = 0, spy = 0, sp = 0, sy = 0;
#pragma omp parallel for reduction(+ : bce, spy, sp, sy) schedule(static)
  for (size_t i = 0; i < m; ++i) {
    if (need_bce) bce += bce_with_logits(z[i], y[i]);
    if (need_dice) {
      const float p = stable_sigmoid(z[i]);
      spy += double(p) * y[i];
      sp += p;
      sy += y[i];
    }
  }
  return {bce, spy, sp, sy};
}

}  // namespace

double loss_sum(LossKind kind, const Tensor& logits, const Tensor& targets, Tensor* dlogits) {
  if (logits.shape() != targets.shape())
    throw std::invalid_argument("loss: logits " + logits.shape().nhwc() + " and targets " +
                                targets.shape().nhwc() + " differ in shape");
  const bool need_bce = kind != LossKind::Dice;
  const bool need_dice = kind != LossKind::BinaryCrossentropy;
  const int n = logits.shape().n;
  const size_t m = logits.shape().sample_numel();
  if (dlogits) dlogits->resize(logits.shape());
  double total = 0;
  for (int s = 0; s < n; ++s) {
    const float* z = logits.sample(s);
    const float* y = targets.sample(s);
    const SampleSums sums = sample_sums(z, y, m, need_bce, need_dice);
    const double inv_m = m ? 1.0 / double(m) : 0.0;
    const double num = 2 * sums.py + 1, den = sums.p + sums.y + 1;
    if (need_bce) total += sums.bce * inv_m;
    if (need_dice) total += 1 - num / den;
    if (!dlogits) continue;
    // d bce_mean / dz = (p - y) / m.
    // d dice / dp_i = -(2 y_i den - num) / den^2, and dp/dz = p (1 - p).
    const float bce_scale = need_bce ? float(inv_m) : 0.f;
    const float a = need_dice ? float(-2.0 / den) : 0.f;
    const float b = need_dice ? float(num / (den * den)) : 0.f;
    float* g = dlogits->sample(s);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < m; ++i) {
      const float p = stable_sigmoid(z[i]);
      g[i] = bce_scale * (p - y[i]) + (a * y[i] + b) * p * (1.f - p);
    }
  }
  return total;
}

}  // namespace trainer
