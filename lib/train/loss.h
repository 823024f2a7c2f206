#pragma once
// Segmentation losses on logits (the model's last layer is linear; its
// sigmoid or softmax is fused into the loss for numerical stability, as
// Keras's from_logits=True).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/train_math.h"
#include "config/config.h"
#include "core/class_mask.h"
#include "core/tensor.h"

namespace trainer {

/// The overlap losses' arguments (Keras 3's Dice and Tversky): Tversky's alpha
/// and beta (Dice ignores them), and whether each image is its own ratio
/// (Keras's axis [1, 2, 3]) or the ratio pools every pixel of the global batch
/// (axis None, Keras's default).
struct OverlapForm {
  double alpha = 0.5, beta = 0.5;
  bool per_image = false;
};

/// config's OverlapForm (the defaults for the other losses).
OverlapForm overlap_form(const LossConfig& config);

/// Whether kind and form make one ratio of the whole global batch, whose
/// shards on several towers must then add their sums (loss_sum's reduce).
bool pools_batch(LossKind kind, const OverlapForm& form);

/// Sums n host doubles in place over the shards (towers) of one global batch,
/// the same result on every shard: each tower's host all-reduce.
using ShardReduce = std::function<void(double* sums, size_t n)>;

/// A tower whose shard of the global batch has no samples calls this exactly
/// once per such batch, where the others call loss_sum with a pooled loss
/// (pools_batch), so that reduce pairs up: it adds nothing.
void join_pooled_loss(const ShardReduce& reduce);

/// The per-pixel form of config's cross-entropy (backend/train_math.h): its
/// label_smoothing, and for the focal losses gamma, alpha and
/// apply_class_balancing; plain for dice and bce_dice. Per-class alphas
/// (config.alphas) are device data: the caller sets form.alphas.
CrossEntropyForm cross_entropy_form(const LossConfig& config);

/// The most classes a categorical model may have (8-bit class-index masks).
inline constexpr int kMaxClasses = 256;

/// The number of classes that masks of a model with output shape `output` hold
/// for kind: output.c for a categorical loss, and for an overlap loss
/// (is_overlap) when output.c > 1; 0 (binary masks) otherwise.
int loss_classes(LossKind kind, const Shape& output);

/// training.class_weight as one weight per class for masks of `classes`
/// classes (loss_classes; 0: binary masks, classes 0 and 1), 1 where the
/// config gives none (the config's list is at most that long: validated).
std::vector<float> class_weight_table(const std::vector<double>& class_weight, int classes);

/// The pixels of mask[0..n) that a categorical loss of `classes` classes
/// counts: those holding a class index (the backend's class_index; not
/// kIgnoredPixel).
size_t counted_pixels(const float* mask, size_t n, int classes);

/// The weight of each counted pixel's loss in a categorical loss_sum over a
/// global batch of B samples holding V counted pixels: B / V, so that the
/// batch's loss, loss_sum / B, is the mean over its counted pixels (Keras 3's
/// sum_over_batch_size reduction of ignore_class's masked loss); 0 when V = 0
/// (Keras's divide_no_nan). Without ignored pixels it is 1 / (H W).
double counted_pixel_weight(double samples, double counted);

/// Returns the SUM over the N samples of the per-sample loss, so that sums from
/// several towers add up and the caller divides by the global batch.
/// Binary losses: logits, targets [N, H, W, 1] (targets 0/1; any C works, a
/// sample's pixels are its H*W*C values):
///  - binary_crossentropy: mean over the sample's pixels of
///    max(z,0) - z*y + log(1+exp(-|z|)) (tf.nn.sigmoid_cross_entropy_with_logits;
///    finite for any finite z).
///  - dice: 1 - (2*sum(p*y) + 1) / (sum(p) + sum(y) + 1), p = sigmoid(z), per image,
///    smooth = 1 (the common Keras U-Net formulation; an empty prediction of an empty
///    mask gives loss 0).
///  - bce_dice: binary_crossentropy + dice.
///  - Dice (Keras 3's keras.losses.Dice), with I = sum(p*y), P = sum(p),
///    Y = sum(y): 1 - 2 I / (Y + P + 1e-7); tversky (keras.losses.tversky,
///    Salehi et al. 2017): 1 - I / (I + alpha (Y - I) + beta (P - I) + 1e-7)
///    (Keras's code: alpha weighs sum(y (1 - p)), beta sum(p (1 - y))). With
///    overlap.per_image the sums run over each image and the returned sum is
///    that of the images' losses; otherwise they run over the whole global
///    batch: this shard's sums, plus the other shards' through reduce when
///    given (with a count of samples), and the returned value is this
///    shard's samples times the batch's loss, so that the shards' values add
///    up to B times it. dlogits is then the derivative of that total over
///    all shards, B dL/dz, which the caller's division by B turns into the
///    batch loss's gradient.
///  - binary_focal_crossentropy, and binary_crossentropy with label
///    smoothing: the mean over the sample's pixels of sigmoid_focal_loss(z,
///    y, form) (backend/train_math.h; form's gamma 0 and no balancing: the
///    cross-entropy against the smoothed targets).
/// Dice and tversky over K >= 2 softmax channels: logits [N, H, W, K],
/// class-index targets [N, H, W, 1], the same ratios as above over the
/// one-hot targets (Keras's), with p = softmax(z): I = sum over pixels of
/// p of the pixel's class, and P = Y = the pixels, per image or pooled over
/// the global batch as above.
/// Categorical losses: logits [N, H, W, K], targets [N, H, W, 1] holding class
/// indices 0..K-1 or kIgnoredPixel: the sum over the counted pixels of
/// log(sum_j exp(z_j)) - z_t (tf.nn.sparse_softmax_cross_entropy_with_logits,
/// in log-sum-exp form; with a form that is not plain, label smoothing or a
/// focal loss, softmax_focal_loss), each times pixel_weight (counted_pixel_weight of the
/// global batch; by default 1 / (H W), the mean over each sample's pixels), so
/// that the batch mean is Keras's sum_over_batch_size reduction. Ignored
/// pixels add nothing and get a zero gradient. Binary losses take no
/// pixel_weight.
/// If dlogits is non-null it is resized to logits' shape and receives
/// d(returned sum)/d(logits). Sums are accumulated in double. logits, targets
/// and dlogits live on one device (logits.device()), where the work runs; the
/// returned sum is a host value.
/// Throws InternalError when the shapes do not match as above.
/// overlap and reduce are read by Dice and tversky only.
double loss_sum(LossKind kind, const Tensor& logits, const Tensor& targets, Tensor* dlogits,
                std::optional<double> pixel_weight = std::nullopt, CrossEntropyForm form = {},
                const OverlapForm& overlap = {}, const ShardReduce& reduce = {});

/// A loss queued on its tower's device by queue_loss: host storage a tower
/// keeps from step to step (no allocation once sized).
struct QueuedLoss {
  /// loss_sum's value, once the device's read-backs are delivered
  /// (DeviceContext::finish_read_backs; at once on a device that does not
  /// defer them): known, or read late, the sum of a term per stride of
  /// sums, over divide: sums[i] times multiply, or with dice a sample's
  /// Dice loss from its sums sums[i..i+4) (plus sums[i] times multiply,
  /// its mean cross-entropy, with with_bce).
  double value() const;
  std::vector<double> sums;  ///< What the device delivers: per-sample segmentation sums [N, 4], or one sum.
  std::vector<float> coef;   ///< The gradient's coefficients [N, 3] (segmentation_loss_grad).
  size_t stride = 1;
  double multiply = 1, divide = 1;
  bool dice = false, with_bce = false;
  double known = 0;          ///< The loss, where queue_loss read it at once.
  bool late = false;         ///< value() forms the loss from sums.
};

/// loss_sum with the value in q (arguments, gradient and errors as
/// loss_sum's): dlogits is written (queued, on a GPU) now and q.value() is
/// the loss once the device's read-backs are delivered. The cross-entropies
/// (binary, focal, categorical), whose gradients need no sum, and dice and
/// bce_dice, whose coefficients the device forms (dice_loss_grad), read
/// their sums late. Keras's Dice and tversky read theirs at once, since the
/// host forms their coefficients: a GPU waits for them (the read-backs
/// deferred before delivered with them).
void queue_loss(QueuedLoss& q, LossKind kind, const Tensor& logits, const Tensor& targets, Tensor* dlogits,
                std::optional<double> pixel_weight = std::nullopt, CrossEntropyForm form = {},
                const OverlapForm& overlap = {}, const ShardReduce& reduce = {});

}  // namespace trainer
