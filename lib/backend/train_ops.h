#pragma once
// Backend ops of the training loop: the loss's per-sample sums and gradient,
// the metrics' logit histogram and the optimizers' updates, on a tower's
// device (dispatch in backend/train_dispatch.cpp; CPU in backend/cpu/, CUDA in
// backend/cuda/). Per-element math comes from train-side TRAINER_HD functions
// (backend/train_math.h), shared by both devices. Pointers are on the device d
// unless a comment says host. Results that the host needs (sums, histograms)
// are returned in host memory: on a GPU such a call waits for the tower's
// compute stream.
#include <cstddef>
#include <cstdint>

#include "backend/train_math.h"
#include "core/device.h"

namespace trainer {

/// Per-sample sums of a segmentation loss for n samples of m values each
/// (z: logits [n, m], y: targets [n, m] in [0, 1]). sums_host [n, 4] (host),
/// per sample: sum of bce_with_logits(z, y) (when need_bce, else 0), and when
/// need_dice sum p*y, sum p, sum y with p = sigmoid(z) (else 0). Accumulated
/// in double.
void segmentation_sums(const Device& d, const float* z, const float* y, int n, size_t m, bool need_bce,
                       bool need_dice, double* sums_host);

/// Loss gradient for n samples of m values: g[s, i] <- coef[s, 0] * (p - y) +
/// (coef[s, 1] * y + coef[s, 2]) * p * (1 - p), p = sigmoid(z[s, i]);
/// coef_host [n, 3] is host memory (see train/loss.cpp for the coefficients).
void segmentation_loss_grad(const Device& d, const float* z, const float* y, int n, size_t m,
                            const float* coef_host, float* g);

/// Sum over n pixels of softmax_loss_term(z[i, :], k, class_index(y[i], k), f)
/// (z: logits [n, k]; y: class indices [n] as floats; f plain: the
/// cross-entropy), accumulated in double, returned to the host. A GPU's sum
/// comes from a fixed partition of the pixels (a function of n only), the
/// same on every run.
double softmax_loss_sum(const Device& d, const float* z, const float* y, size_t n, int k, CrossEntropyForm f);
/// g[i, :] <- softmax_loss_term_grad(z[i, :], k, class_index(y[i], k), f, scale)
/// for the n pixels (g [n, k] must not alias z).
void softmax_loss_grad(const Device& d, const float* z, const float* y, size_t n, int k, CrossEntropyForm f,
                       float scale, float* g);

/// Sum over n values of sigmoid_focal_loss(z[i], y[i], f) (z: logits, y:
/// targets in [0, 1]), accumulated in double, returned to the host; on a GPU
/// from a fixed partition, as softmax_loss_sum.
double sigmoid_focal_sum(const Device& d, const float* z, const float* y, size_t n, CrossEntropyForm f);
/// g[i] <- scale * sigmoid_focal_grad(z[i], y[i], f) for the n values.
void sigmoid_focal_grad(const Device& d, const float* z, const float* y, size_t n, CrossEntropyForm f, float scale,
                        float* g);
/// confusion_host [k, k] (host, row-major, added to): [t][p] += 1 for each of
/// the n pixels with true class t = class_index(y[i], k) >= 0 and predicted
/// class p = argmax_class(z[i, :], k). Integer counts: the order does not matter.
void class_confusion(const Device& d, const float* z, const float* y, size_t n, int k, int64_t* confusion_host);

/// Number of metric thresholds (0.50, 0.55, ..., 0.95).
inline constexpr int kLogitThresholds = 10;

/// hist_host [2, kLogitThresholds + 1] (host, added to): for each of the n
/// values, bin [fg][k] where fg = (y > 0.5) and k = the number of thresholds
/// thr[t] (host, ascending logits) with z > thr[t].
void logit_histogram(const Device& d, const float* z, const float* y, size_t n, const float* thr_host,
                     int64_t* hist_host);

/// For each of k weights ws[j] of ns[j] floats: sums_host[2j] <- sum |w|,
/// sums_host[2j + 1] <- sum w^2, in double (Keras's L1 and L2 regularizer
/// penalties before their factors). ws, ns and sums_host [k, 2] are host
/// arrays; the sums are there when the call returns (a GPU waits once for
/// all k). Both devices sum over a fixed partition, so the same values give
/// the same bits on every run and tower (gradient clipping relies on it).
void abs_and_square_sums(const Device& d, const float* const* ws, const size_t* ns, size_t k, double* sums_host);
/// g[i] <- regularized_grad(g[i], w[i], l1, l2) for n elements (the gradient
/// of a regularized weight; g must not alias w).
void regularizer_grad(const Device& d, const float* w, float* g, size_t n, float l1, float l2);

/// g[i] <- clipped_value(g[i], limit) for n elements (Keras's clipvalue).
void clip_by_value(const Device& d, float* g, size_t n, float limit);
/// Keras's clipnorm (global false: each of the k spans gs[j] of ns[j] floats
/// is one weight's gradient) or global_clipnorm (global true, k == 1: the
/// whole gradient): every element of span j is multiplied by
/// clip_norm_factor(sum of span j's squares, limit, global). The sums are in
/// double over a fixed partition (abs_and_square_sums's), so every tower gets
/// the same bits. Nothing is read back: on a GPU the sums and the factors stay
/// on the device and the call only queues work on the compute stream. gs and
/// ns are host arrays.
void clip_by_norm(const Device& d, float* const* gs, const size_t* ns, size_t k, double limit, bool global);

// The optimizer steps below update elements [0, n) of flat arrays on d (n == 0
// is allowed and does nothing: an empty bucket); a state pointer documented as
// nullable selects the plain form.

/// w[i] -= lr * g[i] (SGD without momentum).
void sgd_step(const Device& d, float* w, const float* g, size_t n, float lr);
/// sgd_momentum_update on every element (velocity is the Keras slot "momentum").
void sgd_momentum_step(const Device& d, float* w, float* velocity, const float* g, size_t n, float lr,
                       float momentum, bool nesterov);
/// adam_update on every element, lr_t precomputed (see train/adam.cpp);
/// amsgrad_update instead when v_hat is not null.
void adam_step(const Device& d, float* w, float* m, float* v, float* v_hat, const float* g, size_t n, float lr_t,
               float b1, float b2, float epsilon);
/// rmsprop_update on every element; centered when mg is not null.
void rmsprop_step(const Device& d, float* w, float* rms, float* mg, const float* g, size_t n, float lr, float rho,
                  float epsilon);
/// rmsprop_momentum_update on every element; centered when mg is not null.
void rmsprop_momentum_step(const Device& d, float* w, float* rms, float* mg, float* mom, const float* g, size_t n,
                           float lr, float rho, float momentum, float epsilon);

}  // namespace trainer
