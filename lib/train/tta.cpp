#include "train/tta.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "data/augmentation.h"
#include "train/loss.h"
#include "train/metrics.h"

namespace trainer {

Tensor predict_tta(Trainer& trainer, const Tensor& images, int batch_size) {
  const Shape s = images.shape(), ps = trainer.model().output_shape().with_batch(s.n);
  const int count = s.h == s.w ? 8 : 4;  // symmetries 0..3 are the flips; 4..7 transpose too
  Tensor sum(ps), turned(s), back(ps);
  sum.zero();
  for (int k = 0; k < count; ++k) {
    const Symmetry sym = Symmetry(k);
    for (int i = 0; i < s.n; ++i) apply_symmetry(sym, images.sample(i), turned.sample(i), s.h, s.w, s.c);
    const Tensor p = trainer.predict(turned, batch_size);
    for (int i = 0; i < ps.n; ++i) apply_symmetry(inverse_symmetry(sym), p.sample(i), back.sample(i), ps.h, ps.w, ps.c);
    float* acc = sum.data();
    const float* b = back.data();
    for (size_t j = 0; j < sum.numel(); ++j) acc[j] += b[j];
  }
  float* acc = sum.data();
  for (size_t j = 0; j < sum.numel(); ++j) acc[j] /= float(count);
  return sum;
}

BatchStats probability_stats(const Trainer& trainer, const Tensor& probabilities, const Tensor& masks) {
  constexpr float kEpsilon = 1e-7f;
  // Logits whose sigmoid (or softmax) gives back the clipped probabilities: log(p / (1 - p)), or log p.
  const bool categorical = trainer.classes() > 0;
  Tensor logits(probabilities.shape());
  for (size_t i = 0; i < logits.numel(); ++i) {
    const float p = std::clamp(probabilities.data()[i], kEpsilon, 1.f - kEpsilon);
    logits.data()[i] = categorical ? std::log(p) : std::log(p / (1.f - p));
  }
  BatchStats st = trainer.empty_stats();
  st.samples = probabilities.shape().n;
  // The probabilities of one global batch (evaluate's chunk): with an ignored
  // class, its loss is the mean over the batch's counted pixels.
  std::optional<double> weight;
  if (trainer.ignores_pixels())
    weight = counted_pixel_weight(masks.shape().n, double(counted_pixels(masks.data(), masks.numel(), trainer.classes())));
  const LossConfig& lc = trainer.config().training.loss;
  CrossEntropyForm form = cross_entropy_form(lc);
  const std::vector<float> alphas(lc.alphas.begin(), lc.alphas.end());  // the logits are on the host
  if (!alphas.empty()) form.alphas = alphas.data();
  st.loss_sum = loss_sum(lc.kind, logits, masks, nullptr, weight, form, overlap_form(lc)) +
                trainer.regularization_penalty() * st.samples;
  accumulate_metrics(logits, masks, st.counts);
  return st;
}

void log_tta(const Shape& input) {
  spdlog::info("test-time augmentation: each prediction is the mean over {} (the input is {})",
               input.h == input.w ? "the 8 flips and quarter turns" : "the 4 flips", input.hwc());
}

}  // namespace trainer
