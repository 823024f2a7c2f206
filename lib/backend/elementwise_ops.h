#pragma once
// Backend interface of the element-wise, channel and resampling ops: the math
// of Activation (and the activation of Conv2D / Conv2DTranspose), Rescaling,
// Add, Multiply, PReLU, the poolings other than MaxPooling2D, Concatenate,
// UpSampling2D, Cropping2D, Dropout, GroupNormalization, LayerNormalization
// and BatchNormalization. Layers call these functions with their tower's
// Device and never loop over tensor elements themselves; the dispatch
// (backend/op_list_dispatch.cpp) calls the CPU implementation (OpenMP loops in
// backend/cpu/, one file per op family) or the CUDA one (kernels in
// backend/cuda/, queued on the tower's compute stream). Each function is
// declared once, with its contract, in backend/elementwise_ops.inc (see
// TRAINER_OP there); this header holds their parameter types and BatchNormOp.
// Both compute every element through the functions of
// backend/elementwise_math.h. Every pointer is on the device d (host memory for
// the CPU) unless a comment says host; every tensor is NHWC ([N, H, W, C],
// row-major), float32 unless it comes with a DType, and must not alias another
// argument unless a function says so. Nothing here allocates per call except BatchNormOp's
// scratch, which is kept across calls of the same shape.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/elementwise_math.h"
#include "backend/ops.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace trainer {

/// The shape to pass the per-(sample, channel) ops (add_channels_forward,
/// channel_sums, scale_channels_*) for a [1, 1, c] input broadcast over a
/// tensor of shape s: s itself when c == s.c; for c == 1 (one value per
/// sample) [N, H*W*C, 1, 1], the same elements as one channel, so that the
/// value's row is the sample.
inline Shape broadcast_rows_shape(Shape s, int c) {
  return c == s.c ? s : Shape{s.n, int(s.sample_numel()), 1, 1};
}

/// Integer upsampling factors of UpSampling2D.
struct UpSample2DParams {
  int sh = 2, sw = 2;  ///< Factors along height and width.
};

/// Rows and columns Cropping2D removes from each side of the image.
struct Crop2DParams {
  int top = 0, bottom = 0, left = 0, right = 0;
};

/// Inverted dropout with a counter-based mask (see elementwise_math.h).
struct DropoutParams {
  uint32_t threshold = 0;  ///< An element is kept when its 24-bit draw is >= threshold = rate * 2^24.
  float scale = 1.f;       ///< 1 / (1 - rate).
  bool per_channel = false;  ///< SpatialDropout2D: one draw per (sample, channel), for all its pixels.
};

/// The arrays of a GroupNormalization or LayerNormalization call besides its
/// tensors, each on the device: the statistics of each normalised row (a
/// (sample, group), or a pixel), the per-channel weights and their
/// gradients, and GroupNormalization's scratch.
struct NormArgs {
  int groups = 1;                ///< The channel groups of group_norm_* (LayerNormalization's apply: 1).
  float* mean = nullptr;         ///< [rows].
  float* istd = nullptr;         ///< [rows]: 1 / sqrt(var + epsilon).
  const float* gamma = nullptr;  ///< [C], or nullptr: 1.
  const float* beta = nullptr;   ///< [C], or nullptr: 0.
  float* dgamma = nullptr;       ///< [C], or nullptr: not wanted.
  float* dbeta = nullptr;        ///< [C], or nullptr: not wanted.
  /// GroupNormalization's per (sample, channel) sums [N, C, 2], 16-byte
  /// aligned (a GPU reads its pairs as double2; InternalError otherwise).
  double* sums = nullptr;
  float* coef = nullptr;  ///< GroupNormalization's backward means [N, groups, 2].
};

#define TRAINER_OP(ret, name, params, args) ret name params;
#include "backend/elementwise_ops.inc"
#undef TRAINER_OP

// ---- BatchNormalization (backend/cpu/batch_norm.cpp) ---------------------

/// One BatchNormalization layer's per-channel vectors, each [C] on the
/// device, in the order the steps fill them.
struct BatchNormChannels {
  int C = 0;
  const float* gamma = nullptr;  ///< Scale, or nullptr: 1.
  const float* beta = nullptr;   ///< Offset, or nullptr: 0.
  float* moving_mean = nullptr;
  float* moving_var = nullptr;
  float* mean = nullptr;  ///< The mean the step normalises with (the batch's or the moving one).
  float* istd = nullptr;  ///< 1 / sqrt(var + epsilon) with that step's variance.
  float* a = nullptr;     ///< y = x * a + b.
  float* b = nullptr;
  float* k1 = nullptr;  ///< dx = k1 * (dy - k2 - xhat * k3) (bn_backward).
  float* k2 = nullptr;
  float* k3 = nullptr;
};

/// BatchNormalization's epsilon and momentum (Keras's keys; the layer's values).
struct BatchNormSettings {
  double epsilon = 0, momentum = 0;
};

/// Batch normalisation over the channel axis of x [N, H, W, C], split so that
/// the caller can all-reduce the per-channel sums between the steps
/// (synchronized BN): the reductions produce sums[2C] in double, the
/// coefficient steps turn (reduced) sums into per-channel vectors [C], the
/// apply steps use them. Every array is on the device (gamma / beta may be
/// nullptr: 1 and 0); counts are host values. On the CPU, per-channel sums are
/// taken per thread over static pixel ranges and added in thread order:
/// deterministic for a fixed thread count; on a GPU, per block in a fixed
/// order: deterministic too. The op keeps its reduction scratch; one op object
/// must not be used from two threads at once. BatchNormBackend is one device's
/// implementation (cpu::make_batch_norm / cuda::make_batch_norm).
class BatchNormBackend {
 public:
  virtual ~BatchNormBackend() = default;
  /// sums[c] <- sum over pixels of x[., c]; sums[C + c] <- sum of x[., c]^2
  /// (x [N, H, W, C] of shape s).
  virtual void stat_sums(const float* x, Shape s, double* sums) = 0;
  /// Training statistics from sums (sum x, sum x^2) over count > 0 pixels per
  /// channel: v.mean, v.istd = 1 / sqrt(max(var, 0) + epsilon) with the
  /// biased var, v.a = gamma * istd, v.b = beta - mean * a; v.moving_* <-
  /// moving_* * momentum + batch * (1 - momentum), with the unbiased batch
  /// variance var * count / max(count - 1, 1).
  virtual void train_coefficients(const double* sums, double count, BatchNormSettings o,
                                  const BatchNormChannels& v) = 0;
  /// Inference: v.mean = moving_mean, v.istd = 1 / sqrt(moving_var +
  /// epsilon), v.a, v.b as above.
  virtual void inference_coefficients(double epsilon, const BatchNormChannels& v) = 0;
  /// y [N, H, W, C] (s) <- x * a[c] + b[c].
  virtual void apply(const float* x, Shape s, const float* a, const float* b, float* y) = 0;
  /// sums[c] <- sum of dy[., c]; sums[C + c] <- sum of dy * xhat, xhat = (x -
  /// v.mean) * v.istd (x, dy [N, H, W, C] of shape s).
  virtual void grad_sums(const float* x, const float* dy, Shape s, const BatchNormChannels& v, double* sums) = 0;
  /// dbeta[c] <- sums[c], dgamma[c] <- sums[C + c] (each skipped when nullptr).
  virtual void param_grads(const double* sums, int C, float* dgamma, float* dbeta) = 0;
  /// v.k1 = gamma * istd; with batch_stats, v.k2 = sums[c] / count and v.k3 =
  /// sums[C + c] / count, else 0 (sums not read).
  virtual void backward_coefficients(const double* sums, double count, bool batch_stats,
                                     const BatchNormChannels& v) = 0;
  /// dx [N, H, W, C] (s) <- bn_backward(dy, x, mean, istd, k1, k2, k3) per channel.
  virtual void backward_data(const float* x, const float* dy, Shape s, const BatchNormChannels& v, float* dx) = 0;
};

/// Binds a BatchNormBackend to the device of its first call.
class BatchNormOp {
 public:
  BatchNormOp();
  ~BatchNormOp();
  BatchNormOp(BatchNormOp&&) noexcept;
  BatchNormOp& operator=(BatchNormOp&&) noexcept;

  /// The backend for d (made on the first call; every later call must pass
  /// the same device).
  BatchNormBackend& on(const Device& d);

 private:
  std::unique_ptr<BatchNormBackend> impl_;
};

}  // namespace trainer
