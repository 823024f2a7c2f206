#pragma once
// Backend interface of the element-wise, channel and resampling ops: the math
// of Activation (and the activation of Conv2D / Conv2DTranspose), Rescaling,
// Add, Multiply, PReLU, the poolings other than MaxPooling2D, Concatenate,
// UpSampling2D, Cropping2D, Dropout, GroupNormalization, LayerNormalization
// and BatchNormalization. Layers call these functions with their tower's
// Device and never loop over tensor elements themselves; the dispatch
// (backend/op_dispatch.cpp) calls the CPU implementation (OpenMP loops in
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

/// PReLU's slope tensor alpha [ah, aw, ac] (Keras's layout): each dimension
/// the input's size, or 1 where Keras's shared_axes shares it.
struct PReLUShape {
  int ah = 1, aw = 1, ac = 1;
};

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

#define TRAINER_OP(ret, name, params, args) ret name params;
#include "backend/elementwise_ops.inc"
#undef TRAINER_OP

// ---- BatchNormalization (backend/cpu/batch_norm.cpp) ---------------------

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
/// implementation (cpu::make_batch_norm / cuda::make_batch_norm); BatchNormOp
/// binds to the device of its first call.
class BatchNormBackend {
 public:
  virtual ~BatchNormBackend() = default;
  virtual void stat_sums(const float* x, Shape s, double* sums) = 0;
  virtual void train_coefficients(const double* sums, double count, int C, double epsilon, double momentum,
                                  const float* gamma, const float* beta, float* moving_mean,
                                  float* moving_var, float* mean, float* istd, float* a, float* b) = 0;
  virtual void inference_coefficients(int C, double epsilon, const float* gamma, const float* beta,
                                      const float* moving_mean, const float* moving_var, float* mean,
                                      float* istd, float* a, float* b) = 0;
  virtual void apply(const float* x, Shape s, const float* a, const float* b, float* y) = 0;
  virtual void grad_sums(const float* x, const float* dy, Shape s, const float* mean, const float* istd,
                         double* sums) = 0;
  virtual void param_grads(const double* sums, int C, float* dgamma, float* dbeta) = 0;
  virtual void backward_coefficients(const double* sums, double count, bool batch_stats, int C,
                                     const float* gamma, const float* istd, float* k1, float* k2,
                                     float* k3) = 0;
  virtual void backward_data(const float* x, const float* dy, Shape s, const float* mean, const float* istd,
                             const float* k1, const float* k2, const float* k3, float* dx) = 0;
};

class BatchNormOp {
 public:
  BatchNormOp();
  ~BatchNormOp();
  BatchNormOp(BatchNormOp&&) noexcept;
  BatchNormOp& operator=(BatchNormOp&&) noexcept;

  /// sums[c] <- sum over pixels of x[., c]; sums[C + c] <- sum of x[., c]^2.
  void stat_sums(const Device& d, const float* x, Shape s, double* sums) { on(d).stat_sums(x, s, sums); }
  /// Training statistics from sums (sum x, sum x^2) over count > 0 pixels per
  /// channel: mean, istd = 1 / sqrt(max(var, 0) + epsilon) with the biased var,
  /// a = gamma * istd, b = beta - mean * a; moving_* <- moving_* * momentum +
  /// batch * (1 - momentum), with the unbiased batch variance var * count /
  /// max(count - 1, 1).
  void train_coefficients(const Device& d, const double* sums, double count, int C, double epsilon,
                          double momentum, const float* gamma, const float* beta, float* moving_mean,
                          float* moving_var, float* mean, float* istd, float* a, float* b) {
    on(d).train_coefficients(sums, count, C, epsilon, momentum, gamma, beta, moving_mean, moving_var, mean,
                             istd, a, b);
  }
  /// Inference: mean = moving_mean, istd = 1 / sqrt(moving_var + epsilon), a, b as above.
  void inference_coefficients(const Device& d, int C, double epsilon, const float* gamma, const float* beta,
                              const float* moving_mean, const float* moving_var, float* mean, float* istd,
                              float* a, float* b) {
    on(d).inference_coefficients(C, epsilon, gamma, beta, moving_mean, moving_var, mean, istd, a, b);
  }
  /// y [N, H, W, C] <- x * a[c] + b[c].
  void apply(const Device& d, const float* x, Shape s, const float* a, const float* b, float* y) {
    on(d).apply(x, s, a, b, y);
  }
  /// sums[c] <- sum of dy[., c]; sums[C + c] <- sum of dy * xhat, xhat = (x - mean) * istd.
  void grad_sums(const Device& d, const float* x, const float* dy, Shape s, const float* mean,
                 const float* istd, double* sums) {
    on(d).grad_sums(x, dy, s, mean, istd, sums);
  }
  /// dbeta[c] <- sums[c], dgamma[c] <- sums[C + c] (each skipped when nullptr).
  void param_grads(const Device& d, const double* sums, int C, float* dgamma, float* dbeta) {
    on(d).param_grads(sums, C, dgamma, dbeta);
  }
  /// k1 = gamma * istd; with batch_stats, k2 = sums[c] / count and
  /// k3 = sums[C + c] / count, else 0.
  void backward_coefficients(const Device& d, const double* sums, double count, bool batch_stats, int C,
                             const float* gamma, const float* istd, float* k1, float* k2, float* k3) {
    on(d).backward_coefficients(sums, count, batch_stats, C, gamma, istd, k1, k2, k3);
  }
  /// dx [N, H, W, C] <- k1 * (dy - k2 - xhat * k3) (bn_backward).
  void backward_data(const Device& d, const float* x, const float* dy, Shape s, const float* mean,
                     const float* istd, const float* k1, const float* k2, const float* k3, float* dx) {
    on(d).backward_data(x, dy, s, mean, istd, k1, k2, k3, dx);
  }

 private:
  BatchNormBackend& on(const Device& d);
  std::unique_ptr<BatchNormBackend> impl_;
};

}  // namespace trainer
