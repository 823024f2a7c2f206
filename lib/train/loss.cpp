// Segmentation losses on a tower's device: the backend's segmentation_sums
// gives per-sample sums (sum bce, sum p*y, sum p, sum y, in double), the
// per-sample losses and gradient coefficients are formed here on the host from
// those sums, and segmentation_loss_grad applies the coefficients per element.
// The cross-entropies' gradients need no sum, and dice's and bce_dice's
// coefficients are formed on the device (dice_loss_grad): queue_loss leaves
// their sums to be read after the step's backward pass is queued
// (QueuedLoss). Keras's Dice and tversky form theirs here, read at once.
#include "train/loss.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "backend/train_math.h"
#include "backend/train_ops.h"
#include "core/error.h"

namespace trainer {

OverlapForm overlap_form(const LossConfig& config) {
  OverlapForm f;
  f.per_image = config.per_image;
  if (config.kind == LossKind::Tversky) f.alpha = config.tversky_alpha, f.beta = config.tversky_beta;
  return f;
}

bool pools_batch(LossKind kind, const OverlapForm& form) { return is_overlap(kind) && !form.per_image; }

namespace {

/// The sums a pooled overlap loss adds over the shards: sum p*y, sum p, sum y, samples.
constexpr size_t kPooledSums = 4;

}  // namespace

void join_pooled_loss(const ShardReduce& reduce) {
  double sums[kPooledSums] = {};
  reduce(sums, kPooledSums);
}

CrossEntropyForm cross_entropy_form(const LossConfig& config) {
  CrossEntropyForm f;
  const LossKind kind = config.kind;
  if (kind == LossKind::Dice || kind == LossKind::BceDice || kind == LossKind::SparseCategoricalCrossentropy ||
      kind == LossKind::KerasDice || kind == LossKind::Tversky)
    return f;
  f.smoothing = float(config.label_smoothing);
  if (kind == LossKind::BinaryFocalCrossentropy) {
    f.gamma = float(config.gamma);
    f.balanced = config.apply_class_balancing;
    if (f.balanced) f.alpha = float(config.alpha);  // otherwise unused, as in Keras
  } else if (kind == LossKind::CategoricalFocalCrossentropy) {
    f.gamma = float(config.gamma);
    f.alpha = float(config.alpha);
  }
  return f;
}

int loss_classes(LossKind kind, const Shape& output) {
  return is_categorical(kind) || (is_overlap(kind) && output.c > 1) ? output.c : 0;
}

std::vector<float> class_weight_table(const std::vector<double>& class_weight, int classes) {
  std::vector<float> w(classes > 0 ? size_t(classes) : 2, 1.f);
  for (size_t c = 0; c < class_weight.size() && c < w.size(); ++c) w[c] = float(class_weight[c]);
  return w;
}

size_t counted_pixels(const float* mask, size_t n, int classes) {
  size_t counted = 0;
  for (size_t i = 0; i < n; ++i) counted += class_index(mask[i], classes) >= 0;
  return counted;
}

double counted_pixel_weight(double samples, double counted) { return counted > 0 ? samples / counted : 0.0; }

namespace {

/// Reads q's value from one sum the device delivers: the sum times multiply, over divide.
double* one_late_sum(QueuedLoss& q, double multiply, double divide) {
  q.late = true;
  q.dice = false;
  q.sums.resize(1);
  q.stride = 1;
  q.multiply = multiply;
  q.divide = divide;
  return q.sums.data();
}

/// The categorical losses (queue_loss): logits [N, H, W, K], targets [N, H, W, 1].
void queue_categorical(QueuedLoss& q, const Tensor& logits, const Tensor& targets, Tensor* dlogits,
                       std::optional<double> pixel_weight, CrossEntropyForm form) {
  const Shape z = logits.shape(), y = targets.shape();
  if (y.c != 1 || z.n != y.n || z.h != y.h || z.w != y.w || z.c < 2)
    throw InternalError("loss: categorical logits " + z.nhwc() + " need class-index targets [N, H, W, 1] of "
                                "their batch and size and at least 2 classes, got " + y.nhwc());
  const Device& d = logits.device();
  const size_t pixels = targets.numel();
  // By default each sample's loss is the mean over its H*W pixels; the sum
  // over samples is then the sum over all pixels divided by H*W.
  const double per_sample = double(size_t(z.h) * size_t(z.w));
  const double w = pixel_weight ? *pixel_weight : 1.0 / per_sample;
  if (dlogits) dlogits->resize(z);
  if (pixels == 0) return;  // q.known, 0
  if (dlogits) softmax_loss_grad(d, logits.data(), targets.data(), pixels, z.c, form, float(w), dlogits->data());
  double* sum = pixel_weight ? one_late_sum(q, w, 1.0) : one_late_sum(q, 1.0, per_sample);
  softmax_loss_sum(d, logits.data(), targets.data(), pixels, z.c, form, sum);
}

/// binary_focal_crossentropy, or binary_crossentropy with label smoothing
/// (queue_loss): the sum over samples of the mean of sigmoid_focal_loss over
/// each one's m values (logits and targets of one shape).
void queue_sigmoid_focal(QueuedLoss& q, const Tensor& logits, const Tensor& targets, Tensor* dlogits,
                         CrossEntropyForm form) {
  const Device& d = logits.device();
  const size_t m = logits.shape().sample_numel(), n = logits.numel();
  if (dlogits) dlogits->resize(logits.shape());
  if (n == 0) return;  // q.known, 0
  if (dlogits) sigmoid_focal_grad(d, logits.data(), targets.data(), n, form, float(1.0 / double(m)), dlogits->data());
  sigmoid_focal_sum(d, logits.data(), targets.data(), n, form, one_late_sum(q, 1.0, double(m)));
}

/// softmax_loss_sum's value, read at once (with any read-backs the device deferred before).
double softmax_sum_now(const Device& d, const float* z, const float* y, size_t n, int k, CrossEntropyForm f) {
  double sum = 0;
  softmax_loss_sum(d, z, y, n, k, f, &sum);
  finish_read_backs(d);
  return sum;
}

/// Keras's backend.epsilon(), in the overlap losses' denominators.
constexpr double kOverlapEpsilon = 1e-7;

/// An overlap loss 1 - a I / D of the sums I = sum p*y, P = sum p, Y = sum y
/// (Dice: a = 2, D = Y + P + eps; tversky: a = 1, D = I + alpha (Y - I) +
/// beta (P - I) + eps), and its gradient coefficients for segmentation_grad
/// (c0 = 0): dL/dp_i = -a (y_i D - I dD/dp_i) / D^2 with dD/dp_i = b y_i + d
/// (Dice: b = 0, d = 1; tversky: b = 1 - alpha - beta, d = beta), so
/// c1 = -a (D - b I) / D^2 and c2 = a d I / D^2, each times scale.
double overlap_ratio(LossKind kind, const OverlapForm& f, double i, double p, double y, double scale, float* c) {
  const bool dice = kind == LossKind::KerasDice;
  const double a = dice ? 2.0 : 1.0, b = dice ? 0.0 : 1.0 - f.alpha - f.beta, d = dice ? 1.0 : f.beta;
  const double den = (dice ? y + p : i + f.alpha * (y - i) + f.beta * (p - i)) + kOverlapEpsilon;
  c[0] = 0.f;
  c[1] = float(scale * -a * (den - b * i) / (den * den));
  c[2] = float(scale * a * d * i / (den * den));
  return 1.0 - a * i / den;
}

/// segmentation_sums of logits and targets [N, H, W, C]: 4 per sample (bce, sum p y, sum p, sum y), read at
/// once (with any read-backs the device deferred before).
std::vector<double> sample_sums(const Tensor& logits, const Tensor& targets, bool need_bce, bool need_dice) {
  const int n = logits.shape().n;
  std::vector<double> sums(size_t(n) * 4);
  segmentation_sums(logits.device(), logits.data(), targets.data(), n, logits.shape().sample_numel(), need_bce,
                    need_dice, sums.data());
  finish_read_backs(logits.device());
  return sums;
}

/// dlogits (when not null) <- segmentation_loss_grad with coef (3 per sample).
void write_gradient(const Tensor& logits, const Tensor& targets, const std::vector<float>& coef, Tensor* dlogits) {
  if (!dlogits) return;
  dlogits->resize(logits.shape());
  segmentation_loss_grad(logits.device(), logits.data(), targets.data(), logits.shape().n,
                         logits.shape().sample_numel(), coef.data(), dlogits->data());
}

/// Dice and tversky (loss_sum): logits and targets of one shape [N, H, W, C].
double overlap_loss_sum(LossKind kind, const Tensor& logits, const Tensor& targets, Tensor* dlogits,
                        const OverlapForm& form, const ShardReduce& reduce) {
  const int n = logits.shape().n;
  const std::vector<double> sums = sample_sums(logits, targets, false, true);
  std::vector<float> coef(size_t(n) * 3);
  double total = 0;
  if (form.per_image) {
    for (int s = 0; s < n; ++s) {
      const double* ss = sums.data() + size_t(s) * 4;
      total += overlap_ratio(kind, form, ss[1], ss[2], ss[3], 1.0, coef.data() + size_t(s) * 3);
    }
  } else {
    double pooled[kPooledSums] = {0, 0, 0, double(n)};
    for (int s = 0; s < n; ++s)
      for (int k = 0; k < 3; ++k) pooled[k] += sums[size_t(s) * 4 + 1 + size_t(k)];
    if (reduce) reduce(pooled, kPooledSums);
    const double batch = pooled[3];
    total = double(n) * overlap_ratio(kind, form, pooled[0], pooled[1], pooled[2], batch, coef.data());
    for (int s = 1; s < n; ++s) std::copy(coef.begin(), coef.begin() + 3, coef.begin() + size_t(s) * 3);
  }
  write_gradient(logits, targets, coef, dlogits);
  return total;
}

/// Dice and tversky over K softmax channels (loss_sum): logits [N, H, W, K],
/// class-index targets [N, H, W, 1], as Keras's over one-hot targets. With
/// p = softmax(z) and one-hot y, each pixel adds p_c to I and 1 to both
/// P = sum p and Y = sum y, so P = Y = H W per image; only I depends on the
/// logits, and dL/dz_j = dL/dI p_c ([j == c] - p_j) (the P terms cancel:
/// sum_k p_k ([j == k] - p_j) = 0), dL/dI being overlap_ratio's c1.
double softmax_overlap_loss_sum(LossKind kind, const Tensor& logits, const Tensor& targets, Tensor* dlogits,
                                const OverlapForm& form, const ShardReduce& reduce) {
  const Shape z = logits.shape(), y = targets.shape();
  if (y.c != 1 || z.n != y.n || z.h != y.h || z.w != y.w)
    throw InternalError("loss: " + logits.shape().nhwc() + " softmax logits need class-index targets "
                                "[N, H, W, 1] of their batch and size, got " + y.nhwc());
  const Device& d = logits.device();
  CrossEntropyForm probability;
  probability.true_class_probability = true;
  const size_t pixels = size_t(z.h) * size_t(z.w), k = size_t(z.c);
  if (dlogits) dlogits->resize(z);
  float coef[3];
  if (form.per_image) {
    double total = 0;
    for (int s = 0; s < z.n; ++s) {
      const float* zs = logits.data() + size_t(s) * pixels * k;
      const float* ys = targets.data() + size_t(s) * pixels;
      const double i = softmax_sum_now(d, zs, ys, pixels, z.c, probability);
      total += overlap_ratio(kind, form, i, double(pixels), double(pixels), 1.0, coef);
      if (dlogits)
        softmax_loss_grad(d, zs, ys, pixels, z.c, probability, coef[1], dlogits->data() + size_t(s) * pixels * k);
    }
    return total;
  }
  const double all = double(pixels) * z.n;
  double pooled[kPooledSums] = {softmax_sum_now(d, logits.data(), targets.data(), pixels * size_t(z.n), z.c,
                                                probability),
                                all, all, double(z.n)};
  if (reduce) reduce(pooled, kPooledSums);
  const double total = double(z.n) * overlap_ratio(kind, form, pooled[0], pooled[1], pooled[2], pooled[3], coef);
  if (dlogits)
    softmax_loss_grad(d, logits.data(), targets.data(), pixels * size_t(z.n), z.c, probability, coef[1],
                      dlogits->data());
  return total;
}

/// dice and bce_dice (queue_loss): logits and targets of one shape [N, H, W, C]. The device forms the
/// gradient's coefficients from the sums (dice_loss_grad), so they are read late.
void queue_dice(QueuedLoss& q, LossKind kind, const Tensor& logits, const Tensor& targets, Tensor* dlogits) {
  const int n = logits.shape().n;
  const size_t m = logits.shape().sample_numel();
  q.late = true;
  q.dice = true;
  q.with_bce = kind == LossKind::BceDice;
  q.sums.resize(size_t(n) * 4);
  q.stride = 4;
  q.multiply = m ? 1.0 / double(m) : 0.0;
  q.divide = 1;
  const Device& d = logits.device();
  if (!dlogits) return segmentation_sums(d, logits.data(), targets.data(), n, m, q.with_bce, true, q.sums.data());
  dlogits->resize(logits.shape());
  dice_loss_grad(d, logits.data(), targets.data(), n, m, q.with_bce, q.sums.data(), dlogits->data());
}

/// Plain binary_crossentropy (queue_loss): its gradient (p - y) / m needs no sum, so its sums are read late.
void queue_binary_crossentropy(QueuedLoss& q, const Tensor& logits, const Tensor& targets, Tensor* dlogits) {
  const int n = logits.shape().n;
  const size_t m = logits.shape().sample_numel();
  const double inv_m = m ? 1.0 / double(m) : 0.0;
  q.late = true;
  q.dice = false;
  q.sums.resize(size_t(n) * 4);
  q.stride = 4;  // each sample's bce sum
  q.multiply = inv_m;
  q.divide = 1;
  segmentation_sums(logits.device(), logits.data(), targets.data(), n, m, true, false, q.sums.data());
  q.coef.assign(size_t(n) * 3, 0.f);
  for (int s = 0; s < n; ++s) q.coef[size_t(s) * 3] = float(inv_m);
  write_gradient(logits, targets, q.coef, dlogits);
}

}  // namespace

double QueuedLoss::value() const {
  if (!late) return known;
  double total = 0;
  for (size_t i = 0; i < sums.size(); i += stride) {
    if (!dice) {
      total += sums[i] * multiply;
      continue;
    }
    // A sample's sums (bce, sum p y, sum p, sum y): its mean cross-entropy (bce_dice), then its Dice loss.
    const double* ss = sums.data() + i;
    if (with_bce) total += ss[0] * multiply;
    total += 1 - (2 * ss[1] + 1) / (ss[2] + ss[3] + 1);
  }
  return total / divide;
}

void queue_loss(QueuedLoss& q, LossKind kind, const Tensor& logits, const Tensor& targets, Tensor* dlogits,
                std::optional<double> pixel_weight, CrossEntropyForm form, const OverlapForm& overlap,
                const ShardReduce& reduce) {
  q.late = false;
  q.known = 0;
  if (is_categorical(kind)) return queue_categorical(q, logits, targets, dlogits, pixel_weight, form);
  if (pixel_weight) throw InternalError("loss: a pixel weight is for the categorical losses only");
  if (is_overlap(kind) && logits.shape().c > 1) {
    q.known = softmax_overlap_loss_sum(kind, logits, targets, dlogits, overlap, reduce);
    return;
  }
  if (logits.shape() != targets.shape())
    throw InternalError("loss: logits " + logits.shape().nhwc() + " and targets " +
                                targets.shape().nhwc() + " differ in shape");
  if (kind == LossKind::BinaryFocalCrossentropy || (kind == LossKind::BinaryCrossentropy && !form.plain()))
    return queue_sigmoid_focal(q, logits, targets, dlogits, form);
  if (is_overlap(kind)) {
    q.known = overlap_loss_sum(kind, logits, targets, dlogits, overlap, reduce);
    return;
  }
  if (kind == LossKind::BinaryCrossentropy) return queue_binary_crossentropy(q, logits, targets, dlogits);
  queue_dice(q, kind, logits, targets, dlogits);
}

double loss_sum(LossKind kind, const Tensor& logits, const Tensor& targets, Tensor* dlogits,
                std::optional<double> pixel_weight, CrossEntropyForm form, const OverlapForm& overlap,
                const ShardReduce& reduce) {
  QueuedLoss q;
  queue_loss(q, kind, logits, targets, dlogits, pixel_weight, form, overlap, reduce);
  finish_read_backs(logits.device());
  return q.value();
}

}  // namespace trainer
