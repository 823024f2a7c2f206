#pragma once
// Element-wise math of the losses, metrics and optimizers (backend/train_ops.h),
// written once as inline functions that the CPU loops and the CUDA kernels
// call (TRAINER_HD expands to __host__ __device__ under nvcc).
#include <cmath>

#include "core/math.h"

namespace trainer {

/// Numerically stable binary cross-entropy of sigmoid(z) against y in [0, 1]:
/// max(z, 0) - z*y + log(1 + exp(-|z|)) (TensorFlow's
/// tf.nn.sigmoid_cross_entropy_with_logits). Finite for any finite z.
TRAINER_HD inline float bce_with_logits(float z, float y) {
  return fmaxf(z, 0.f) - z * y + log1pf(expf(-fabsf(z)));
}

/// Adds one pixel (logit z, target y) to a sample's loss sums: bce +=
/// bce_with_logits(z, y) when need_bce; with need_dice, p = sigmoid(z) and
/// spy += p*y, sp += p, sy += y (the soft Dice terms, Milletari et al. 2016).
TRAINER_HD inline void add_loss_terms(float z, float y, bool need_bce, bool need_dice, double& bce, double& spy,
                                      double& sp, double& sy) {
  if (need_bce) bce += bce_with_logits(z, y);
  if (need_dice) {
    const float p = stable_sigmoid(z);
    spy += double(p) * y;
    sp += p;
    sy += y;
  }
}

/// Gradient of a segmentation loss with respect to one logit z (target y),
/// from the per-sample coefficients that train/loss.cpp derives:
/// c0 (p - y) + (c1 y + c2) p (1 - p), p = sigmoid(z).
TRAINER_HD inline float segmentation_grad(float z, float y, float c0, float c1, float c2) {
  const float p = stable_sigmoid(z);
  return c0 * (p - y) + (c1 * y + c2) * p * (1.f - p);
}

/// The coefficients c [3] of segmentation_grad for one sample of the
/// smooth-1 Dice loss 1 - (2 sum(p y) + 1) / (sum(p) + sum(y) + 1), plus
/// the sample's mean binary cross-entropy over its m values with with_bce
/// (bce_dice), from its sums [4] (bce, sum p y, sum p, sum y: add_loss_terms):
/// d bce_mean / dz = (p - y) / m, so c0 = 1 / m (else 0); with num = 2 sum(p y)
/// + 1 and den = sum(p) + sum(y) + 1, d dice / dp_i = -(2 y_i den - num) /
/// den^2 and dp/dz = p (1 - p), so c1 = -2 / den and c2 = num / den^2. In
/// double, rounded to float at the end, the same on both devices.
TRAINER_HD inline void dice_coefficients(const double* sums, size_t m, bool with_bce, float* c) {
  const double num = 2 * sums[1] + 1, den = sums[2] + sums[3] + 1;
  c[0] = with_bce && m ? float(1.0 / double(m)) : 0.f;
  c[1] = float(-2.0 / den);
  c[2] = float(num / (den * den));
}

/// How a cross-entropy is changed per pixel: Keras's label_smoothing and the
/// focal losses' gamma and alpha (BinaryFocalCrossentropy,
/// CategoricalFocalCrossentropy; Lin et al. 2017, "Focal Loss for Dense
/// Object Detection"). The default is the plain cross-entropy.
struct CrossEntropyForm {
  float gamma = 0.f;      ///< Focusing parameter >= 0: each term times (1 - p_t)^gamma; 0: none.
  /// Categorical: every term's factor (CategoricalFocalCrossentropy's alpha).
  /// Binary with `balanced`: the weight of target 1, 1 - alpha that of target 0.
  float alpha = 1.f;
  bool balanced = false;  ///< Binary: BinaryFocalCrossentropy's apply_class_balancing.
  /// In [0, 1]: targets y <- y (1 - s) + s / 2 (binary) or onehot (1 - s) + s / K (categorical).
  float smoothing = 0.f;
  /// training.class_weight on the tower's device, or null: each pixel's
  /// term times the weight of its mask class (binary: [2], indexed by y > 0.5
  /// before smoothing; categorical: [K], by the class index).
  const float* class_weights = nullptr;
  /// Categorical, on the tower's device, or null: CategoricalFocalCrossentropy's
  /// alpha per class [K] (Keras 3's list), each class j's term times alphas[j]
  /// in place of the one alpha.
  const float* alphas = nullptr;
  /// Categorical only, in place of a cross-entropy: each pixel's term is the
  /// softmax probability of its class, p_c, its share of the intersection
  /// sum(p * onehot) of Keras's Dice and Tversky over one-hot targets
  /// (train/loss.cpp); the other fields are then unused.
  bool true_class_probability = false;
  TRAINER_HD bool plain() const {
    return gamma == 0.f && alpha == 1.f && !balanced && smoothing == 0.f && class_weights == nullptr &&
           alphas == nullptr && !true_class_probability;
  }
  /// The class weight of a pixel of class c (1 without class weights).
  TRAINER_HD float class_weight(int c) const { return class_weights ? class_weights[c] : 1.f; }
};

/// Keras's binary_focal_crossentropy of one logit z against target y in
/// [0, 1], on logits: with t = y (1 - s) + s / 2 (label smoothing s),
/// p = sigmoid(z) and 1 - p_t = t (1 - p) + (1 - t) p,
///   w (1 - p_t)^gamma bce_with_logits(z, t),
/// w = t alpha + (1 - t) (1 - alpha) when balanced, else 1, times the class
/// weight of y. gamma 0 without balancing is binary_crossentropy with label
/// smoothing and class weights. (Keras computes
/// the cross-entropy from probabilities clipped to [1e-7, 1 - 1e-7]; here
/// it is exact, which differs only where p is within 1e-7 of 0 or 1.)
TRAINER_HD inline float sigmoid_focal_loss(float z, float y, CrossEntropyForm f) {
  const float t = y * (1.f - f.smoothing) + 0.5f * f.smoothing;
  float l = bce_with_logits(z, t);
  if (f.gamma != 0.f) l *= powf(t * stable_sigmoid(-z) + (1.f - t) * stable_sigmoid(z), f.gamma);
  if (f.balanced) l *= t * f.alpha + (1.f - t) * (1.f - f.alpha);
  return l * f.class_weight(y > 0.5f ? 1 : 0);
}

/// d sigmoid_focal_loss / dz: with m = 1 - p_t, F = m^gamma and
/// dm/dz = (1 - 2t) p (1 - p), w F ((p - t) + gamma bce (1 - 2t) p (1 - p) / m)
/// (the second term 0 where m = 0, its limit).
TRAINER_HD inline float sigmoid_focal_grad(float z, float y, CrossEntropyForm f) {
  const float t = y * (1.f - f.smoothing) + 0.5f * f.smoothing;
  const float p = stable_sigmoid(z), q = stable_sigmoid(-z);
  float g = (1.f - t) * p - t * q;  // p - t, without losing a small 1 - p to rounding
  if (f.gamma != 0.f) {
    const float m = t * q + (1.f - t) * p;
    const float dm = m > 0.f ? (1.f - 2.f * t) * (p * q / m) : 0.f;  // dm/dz / m, bounded by 1
    g = powf(m, f.gamma) * (g + f.gamma * bce_with_logits(z, t) * dm);
  }
  if (f.balanced) g *= t * f.alpha + (1.f - t) * (1.f - f.alpha);
  return g * f.class_weight(y > 0.5f ? 1 : 0);
}

/// Number of the T ascending thresholds thr that the logit z exceeds (the
/// metrics' histogram bin: sigmoid(z) > t  <=>  z > logit(t)).
TRAINER_HD inline int logit_bin(float z, const float* thr, int T) {
  int k = 0;
  for (int t = 0; t < T; ++t) k += z > thr[t];
  return k;
}

/// keras.metrics.AUC's bucket of the probability sigmoid(z) among `bins` evenly
/// spaced thresholds (its _update_confusion_matrix_variables_optimized):
/// ceil(p (bins - 1)) - 1, clamped to [0, bins - 1]. p exceeds threshold i
/// (i / (bins - 1) for 0 < i < bins - 1, -epsilon for i = 0, 1 + epsilon for
/// i = bins - 1) exactly when its bucket is at least i.
TRAINER_HD inline int probability_bucket(float z, int bins) {
  const float p = 1.f / (1.f + expf(-z));
  const int b = int(ceilf(p * float(bins - 1))) - 1;
  return b < 0 ? 0 : (b > bins - 1 ? bins - 1 : b);
}

/// The class a target value names: c when v is a whole number c in [0, k),
/// else -1 (no class; such a pixel adds nothing to the categorical loss,
/// gradient or confusion counts: an ignored pixel, core/class_mask.h's
/// kIgnoredPixel; the data loader refuses any other value outside the classes).
TRAINER_HD inline int class_index(float v, int k) {
  const int c = v >= 0.f && v < float(k) ? int(v) : -1;
  return c >= 0 && float(c) == v ? c : -1;
}

/// The largest of one pixel's k values z, into mx, and sum_j exp(z_j - mx),
/// returned: the shared part of the softmax functions below.
TRAINER_HD inline float softmax_denominator(const float* z, int k, float& mx) {
  mx = z[0];
  for (int j = 1; j < k; ++j) mx = fmaxf(mx, z[j]);
  float s = 0.f;
  for (int j = 0; j < k; ++j) s += expf(z[j] - mx);
  return s;
}

/// Softmax cross-entropy of one pixel's k logits z (contiguous, NHWC's last
/// axis) against class c: (max z - z_c) + log(sum_j exp(z_j - max z)), the
/// log-sum-exp form of tf.nn.sparse_softmax_cross_entropy_with_logits (finite
/// for finite z; the first term exact, so a confident pixel's small loss is
/// not lost against max z). 0 for c = -1.
TRAINER_HD inline float softmax_cross_entropy(const float* z, int k, int c) {
  if (c < 0) return 0.f;
  float mx;
  const float s = softmax_denominator(z, k, mx);
  return (mx - z[c]) + logf(s);
}

/// g_j <- scale * (softmax(z)_j - [j == c]) for one pixel's k logits: the
/// gradient of scale * softmax_cross_entropy(z, k, c); 0 for c = -1.
TRAINER_HD inline void softmax_cross_entropy_grad(const float* z, int k, int c, float scale, float* g) {
  if (c < 0) {
    for (int j = 0; j < k; ++j) g[j] = 0.f;
    return;
  }
  float mx;
  const float inv = 1.f / softmax_denominator(z, k, mx);
  for (int j = 0; j < k; ++j) g[j] = scale * (expf(z[j] - mx) * inv - (j == c ? 1.f : 0.f));
}

/// One pixel's softmax terms for the focal forms: the largest logit mx (of
/// class top), s = sum_j exp(z_j - mx) and log s, and for each class
/// p_j = exp(z_j - mx) / s and 1 - p_j, the latter from the other classes'
/// sum where p_j may be near 1 (class top), so that it keeps its digits.
struct SoftmaxTerms {
  float mx, s, log_s, rest;  ///< rest = s - 1, the classes other than top.
  int top;
  TRAINER_HD SoftmaxTerms(const float* z, int k) : top(0) {
    for (int j = 1; j < k; ++j)
      if (z[j] > z[top]) top = j;
    mx = z[top];
    rest = 0.f;
    for (int j = 0; j < k; ++j)
      if (j != top) rest += expf(z[j] - mx);
    s = 1.f + rest;
    log_s = log1pf(rest);
  }
  TRAINER_HD float p(const float* z, int j) const { return expf(z[j] - mx) / s; }
  TRAINER_HD float miss(const float* z, int j) const { return j == top ? rest / s : 1.f - p(z, j); }
  /// -log p_j.
  TRAINER_HD float nlp(const float* z, int j) const { return (mx - z[j]) + log_s; }
};

/// Keras's categorical_focal_crossentropy (and categorical_crossentropy with
/// label smoothing) of one pixel's k logits against class c, on logits: with
/// targets t_j = (1 - s) [j == c] + s / k and p = softmax(z),
///   alpha w_c sum_j t_j (1 - p_j)^gamma (-log p_j),
/// or with per-class alphas w_c sum_j alpha_j t_j (1 - p_j)^gamma (-log p_j),
/// -log p_j = (max z - z_j) + log sum_i exp(z_i - max z), w_c the class
/// weight of c (1 without). 0 for c = -1.
/// (Keras clips p to [1e-7, 1 - 1e-7] first; here the log is exact.)
TRAINER_HD inline float softmax_focal_loss(const float* z, int k, int c, CrossEntropyForm f) {
  if (c < 0) return 0.f;
  const SoftmaxTerms st(z, k);
  const float off = f.smoothing / float(k), on = 1.f - f.smoothing + off;
  float sum = 0.f;
  for (int j = 0; j < k; ++j) {
    const float t = j == c ? on : off;
    if (t == 0.f) continue;
    float term = t * st.nlp(z, j);
    if (f.gamma != 0.f) term *= powf(st.miss(z, j), f.gamma);
    if (f.alphas) term *= f.alphas[j];
    sum += term;
  }
  return (f.alphas ? 1.f : f.alpha) * f.class_weight(c) * sum;
}

/// g_j <- scale * d softmax_focal_loss / dz_j: alpha w_c (h_j - p_j sum_i h_i)
/// with h_i = t_i F_i (gamma r_i - 1), F_i = (1 - p_i)^gamma and
/// r_i = p_i log p_i / (1 - p_i) (its limit -1 where p_i = 1); for gamma 0,
/// alpha w_c (p_j - t_j). With per-class alphas, h_i is times alpha_i and
/// the outer alpha is 1. 0 for c = -1.
TRAINER_HD inline void softmax_focal_grad(const float* z, int k, int c, CrossEntropyForm f, float scale, float* g) {
  if (c < 0) {
    for (int j = 0; j < k; ++j) g[j] = 0.f;
    return;
  }
  scale *= (f.alphas ? 1.f : f.alpha) * f.class_weight(c);
  const SoftmaxTerms st(z, k);
  const float off = f.smoothing / float(k), on = 1.f - f.smoothing + off;
  auto h_of = [&](int j) {
    const float t = (j == c ? on : off) * (f.alphas ? f.alphas[j] : 1.f);
    if (f.gamma == 0.f) return -t;
    const float miss = st.miss(z, j);
    const float r = miss > 0.f ? st.p(z, j) * -st.nlp(z, j) / miss : -1.f;
    return t * powf(miss, f.gamma) * (f.gamma * r - 1.f);
  };
  float h_sum = 0.f;
  for (int j = 0; j < k; ++j) h_sum += h_of(j);
  for (int j = 0; j < k; ++j) g[j] = scale * (h_of(j) - st.p(z, j) * h_sum);
}

/// p_c = softmax(z)_c of one pixel's k logits; 0 for c = -1.
TRAINER_HD inline float softmax_true_probability(const float* z, int k, int c) {
  if (c < 0) return 0.f;
  float mx;
  const float s = softmax_denominator(z, k, mx);
  return expf(z[c] - mx) / s;
}

/// g_j <- scale * d p_c / dz_j = scale * p_c ([j == c] - p_j), the gradient
/// of scale * softmax_true_probability(z, k, c); 0 for c = -1.
TRAINER_HD inline void softmax_true_probability_grad(const float* z, int k, int c, float scale, float* g) {
  if (c < 0) {
    for (int j = 0; j < k; ++j) g[j] = 0.f;
    return;
  }
  float mx;
  const float inv = 1.f / softmax_denominator(z, k, mx);
  const float pc = expf(z[c] - mx) * inv;
  for (int j = 0; j < k; ++j) g[j] = scale * pc * ((j == c ? 1.f : 0.f) - expf(z[j] - mx) * inv);
}

/// softmax_cross_entropy, softmax_true_probability for a form with
/// true_class_probability, or softmax_focal_loss for another form that is
/// not plain.
TRAINER_HD inline float softmax_loss_term(const float* z, int k, int c, CrossEntropyForm f) {
  if (f.true_class_probability) return softmax_true_probability(z, k, c);
  return f.plain() ? softmax_cross_entropy(z, k, c) : softmax_focal_loss(z, k, c, f);
}
/// The gradient of softmax_loss_term times scale, into g[0..k).
TRAINER_HD inline void softmax_loss_term_grad(const float* z, int k, int c, CrossEntropyForm f, float scale,
                                              float* g) {
  if (f.true_class_probability)
    softmax_true_probability_grad(z, k, c, scale, g);
  else if (f.plain())
    softmax_cross_entropy_grad(z, k, c, scale, g);
  else
    softmax_focal_grad(z, k, c, f, scale, g);
}

/// x_j <- exp(x_j - max x) / sum_i exp(x_i - max x) over one pixel's k values, in place
/// (keras.activations.softmax on the last axis).
TRAINER_HD inline void softmax_in_place(float* x, int k) {
  float mx;
  const float inv = 1.f / softmax_denominator(x, k, mx);
  for (int j = 0; j < k; ++j) x[j] = expf(x[j] - mx) * inv;
}

/// The predicted class of one pixel's k logits: the index of the largest, the
/// first of equal ones (as tf.argmax and numpy.argmax); a NaN never beats a
/// number (numpy would return the first NaN; NaN logits stop training anyway).
TRAINER_HD inline int argmax_class(const float* z, int k) {
  int best = 0;
  for (int j = 1; j < k; ++j)
    if (z[j] > z[best] || (z[best] != z[best] && z[j] == z[j])) best = j;
  return best;
}

/// keras.optimizers.SGD (Keras 3, as tf.keras 2) on one weight: velocity = momentum*velocity - lr*g;
/// w += momentum*velocity - lr*g with nesterov, else w += velocity.
TRAINER_HD inline void sgd_momentum_update(float& w, float& velocity, float g, float lr, float momentum,
                                           bool nesterov) {
  velocity = momentum * velocity - lr * g;
  w += nesterov ? momentum * velocity - lr * g : velocity;
}

/// Adam's moments (keras.optimizers.Adam, Keras 3 as tf.keras 2): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2.
TRAINER_HD inline void adam_moments(float& m, float& v, float g, float b1, float b2) {
  m = b1 * m + (1.f - b1) * g;
  v = b2 * v + (1.f - b2) * g * g;
}

/// keras.optimizers.Adam (Keras 3, as tf.keras 2) on one weight, lr_t = lr*sqrt(1-b2^t)/(1-b1^t) precomputed:
/// adam_moments, then w -= lr_t * m / (sqrt(v) + epsilon).
TRAINER_HD inline void adam_update(float& w, float& m, float& v, float g, float lr_t, float b1, float b2,
                                   float epsilon) {
  adam_moments(m, v, g, b1, b2);
  w -= lr_t * m / (sqrtf(v) + epsilon);
}

/// Adam with amsgrad (keras.optimizers.Adam(amsgrad=True), Keras 3 as TensorFlow's
/// ApplyAdamWithAmsgrad; Reddi et al. 2018, "On the Convergence of Adam and
/// Beyond"): adam_moments, then v_hat = max(v_hat, v) and
/// w -= lr_t * m / (sqrt(v_hat) + epsilon).
TRAINER_HD inline void amsgrad_update(float& w, float& m, float& v, float& v_hat, float g, float lr_t, float b1,
                                      float b2, float epsilon) {
  adam_moments(m, v, g, b1, b2);
  v_hat = fmaxf(v_hat, v);
  w -= lr_t * m / (sqrtf(v_hat) + epsilon);
}

/// The mean square RMSprop divides by (before the root and epsilon): rms, or
/// when centered (mg not null) the variance estimate rms - mg^2, after this
/// updates *mg = rho mg + (1-rho) g, the mean gradient (Keras 3's centered
/// RMSprop, Graves 2013). Mathematically rms >= mg^2; the float difference is
/// kept >= 0, where Keras's sqrt of a rounding's negative would give NaN.
TRAINER_HD inline float rmsprop_mean_square(float rms, float* mg, float g, float rho) {
  if (!mg) return rms;
  *mg = rho * *mg + (1.f - rho) * g;
  return fmaxf(rms - *mg * *mg, 0.f);
}

/// keras.optimizers.RMSprop (Keras 3, and tf.keras 2.11+'s optimizer) without
/// momentum: rms = rho rms + (1-rho) g^2; w -= lr * g / sqrt(s + epsilon),
/// s = rmsprop_mean_square (rms, or centered rms - mg^2 with mg not null).
/// (tf.keras 2.10's legacy RMSprop divided by sqrt(s) + epsilon here.)
TRAINER_HD inline void rmsprop_update(float& w, float& rms, float* mg, float g, float lr, float rho, float epsilon) {
  rms = rho * rms + (1.f - rho) * g * g;
  w -= lr * g / sqrtf(rmsprop_mean_square(rms, mg, g, rho) + epsilon);
}

/// RMSprop with momentum, as Keras 3 and TensorFlow's ApplyRMSProp kernel
/// (ApplyCenteredRMSProp with mg not null): rms = rho rms + (1-rho) g^2;
/// mom = momentum mom + lr g / sqrt(s + epsilon), s as in rmsprop_update;
/// w -= mom.
TRAINER_HD inline void rmsprop_momentum_update(float& w, float& rms, float* mg, float& mom, float g, float lr,
                                               float rho, float momentum, float epsilon) {
  rms = rho * rms + (1.f - rho) * g * g;
  mom = momentum * mom + lr * g / sqrtf(rmsprop_mean_square(rms, mg, g, rho) + epsilon);
  w -= mom;
}

/// g plus the gradient at w of Keras's L1L2 regularizer penalty
/// l1 * sum |w| + l2 * sum w^2 (keras/regularizers): l1 * sign(w) + 2 * l2 * w,
/// with sign(0) = 0 (TensorFlow's gradient of abs).
TRAINER_HD inline float regularized_grad(float g, float w, float l1, float l2) {
  const float sign = w > 0.f ? 1.f : (w < 0.f ? -1.f : 0.f);
  return g + l1 * sign + 2.f * l2 * w;
}

/// g clamped to [-limit, limit] (tf.clip_by_value, Keras's clipvalue); NaN
/// stays NaN.
TRAINER_HD inline float clipped_value(float g, float limit) { return g > limit ? limit : (g < -limit ? -limit : g); }

/// The factor that Keras's gradient clipping by norm multiplies a gradient by,
/// from the sum of its elements' squares (keras.optimizers.Optimizer.
/// _clip_gradients): limit / max(||g||, limit), which is 1 for a norm within
/// the limit. global false: clipnorm, one weight's gradient (tf.clip_by_norm;
/// a NaN norm leaves it as it is). global true: global_clipnorm, every
/// weight's (tf.clip_by_global_norm; a norm that is not finite gives NaN).
TRAINER_HD inline float clip_norm_factor(double square_sum, double limit, bool global) {
  if (global && !(square_sum < INFINITY)) return NAN;  // inf or NaN (a sum of squares is never negative)
  const double norm = sqrt(square_sum);
  const double f = limit / (norm > limit ? norm : limit);
  return f < 1 ? float(f) : 1.f;
}

}  // namespace trainer
