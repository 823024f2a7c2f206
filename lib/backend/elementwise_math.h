#pragma once
// Per-element math of the element-wise backend ops (backend/elementwise_ops.h),
// written once: the CPU loops in backend/cpu/ and the CUDA kernels in
// backend/cuda/ call the same functions (TRAINER_HD is __host__ __device__
// under nvcc), so both devices compute the same expression for every element.
#include <cstdint>

#include "core/math.h"

namespace trainer {

/// The activations of Keras's `activation` argument that trainer supports:
/// "linear" (identity), "relu" (max(0, x)), "sigmoid" (1/(1+e^-x)).
enum class Activation { Linear, Relu, Sigmoid };

// ---- Activations ---------------------------------------------------------

/// relu(x) = max(0, x) (NaN maps to 0).
TRAINER_HD inline float relu_forward(float x) { return x > 0.f ? x : 0.f; }
/// dL/dx of relu from its output y and dL/dy: dy where y > 0, else 0.
TRAINER_HD inline float relu_backward(float y, float dy) { return y > 0.f ? dy : 0.f; }
/// sigmoid(x), stable for large |x|.
TRAINER_HD inline float sigmoid_forward(float x) { return stable_sigmoid(x); }
/// dL/dx of sigmoid from its output y and dL/dy: dy * y (1 - y).
TRAINER_HD inline float sigmoid_backward(float y, float dy) { return dy * (y * (1.f - y)); }

// ---- Rescaling -----------------------------------------------------------

/// x * scale + offset.
TRAINER_HD inline float scale_shift(float x, float scale, float offset) { return x * scale + offset; }

// ---- Batch normalisation (one element of channel c) ----------------------

/// Normalised value xhat = (x - mean) * istd.
TRAINER_HD inline float bn_xhat(float x, float mean, float istd) { return (x - mean) * istd; }
/// Forward with folded coefficients: y = x * a + b, a = gamma * istd, b = beta - mean * a.
TRAINER_HD inline float bn_apply(float x, float a, float b) { return x * a + b; }
/// dx = k1 * (dy - k2 - xhat * k3), with k1 = gamma * istd, k2 = mean(dy),
/// k3 = mean(dy * xhat) (k2 = k3 = 0 after an inference forward).
TRAINER_HD inline float bn_backward(float dy, float x, float mean, float istd, float k1, float k2,
                                    float k3) {
  return k1 * (dy - k2 - bn_xhat(x, mean, istd) * k3);
}

// ---- Dropout (counter-based mask) ----------------------------------------

/// splitmix64's output function (Steele, Lea & Flood 2014): a bijective 64-bit mixer.
TRAINER_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/// Key of one training step of one Dropout layer.
TRAINER_HD inline uint64_t dropout_step_key(uint64_t run_seed, uint64_t layer_seed, uint64_t step) {
  return mix64(mix64(mix64(run_seed) ^ layer_seed) ^ step);
}
/// Key of one sample (global index) within a step.
TRAINER_HD inline uint64_t dropout_sample_key(uint64_t step_key, uint64_t sample) {
  return mix64(step_key ^ sample);
}
/// Element e's 24-bit draw: the (e+1)-th output of a splitmix64 stream seeded with key.
TRAINER_HD inline uint32_t dropout_draw(uint64_t sample_key, uint64_t e) {
  return uint32_t(mix64(sample_key + (e + 1) * 0x9e3779b97f4a7c15ULL) >> 40);
}
/// Whether a draw keeps its element: draw >= threshold = rate * 2^24.
TRAINER_HD inline bool dropout_keep(uint32_t draw, uint32_t threshold) { return draw >= threshold; }
/// Kept elements are scaled by 1 / (1 - rate), dropped ones are 0.
TRAINER_HD inline float dropout_apply(bool keep, float x, float scale) { return keep ? x * scale : 0.f; }

}  // namespace trainer
