#pragma once
// Backend interface of the element-wise, channel and resampling ops: the math
// of Activation (and the activation of Conv2D / Conv2DTranspose), Rescaling,
// Add, Multiply, PReLU, the poolings other than MaxPooling2D, Concatenate,
// UpSampling2D, Cropping2D, Dropout, GroupNormalization, LayerNormalization
// and BatchNormalization. Layers call these functions with their tower's
// Device and never loop over tensor elements themselves; the dispatch
// (backend/elementwise_dispatch.cpp) calls the CPU implementation (OpenMP
// loops in backend/cpu/, one file per op family) or the CUDA one (kernels in
// backend/cuda/, queued on the tower's compute stream).
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

// ---- Activation (backend/cpu/activation.cpp) -----------------------------

/// In place: y[i] <- f(y[i]) for n elements (Linear: nothing).
void activation_forward(const Device& d, Activation a, float* y, size_t n);
/// dx[i] <- dy[i] * f'(x[i]) for n elements (dx may be dy), with f' written in
/// terms of v: the output y = f(x) (relu' = (y > 0), sigmoid' = y (1 - y)), or
/// the input x for the kinds with activation_needs_input (gelu, silu,
/// hard_silu, mish); activation_dx. Linear copies dy.
void activation_backward(const Device& d, Activation a, const float* v, const float* dy, float* dx, size_t n);

/// In place: each of n pixels' k values x[i, :] <- their softmax
/// (softmax_in_place, backend/train_math.h: keras.activations.softmax on the
/// channel axis). Forward only: the layers refuse a softmax that needs a
/// gradient (the losses take the logits before it).
void softmax_channels(const Device& d, float* x, size_t n, int k);

// ---- Rescaling (backend/cpu/scale.cpp) -----------------------------------

/// y[i] <- x[i] * scale + offset for n elements (y may be x).
void scale_shift_forward(const Device& d, const float* x, float scale, float offset, float* y, size_t n);
/// dx[i] <- dy[i] * scale for n elements (dx may be dy).
void scale_backward(const Device& d, const float* dy, float scale, float* dx, size_t n);

// ---- Add (backend/cpu/add.cpp) -------------------------------------------

/// y <- ((xs[0] + xs[1]) + xs[2]) + ... for k >= 2 inputs of n elements each,
/// added in input order. The pointer array xs is host memory.
void add_forward(const Device& d, const float* const* xs, size_t k, float* y, size_t n);

/// In place: y[i] <- y[i] + x[i] for n elements of type t (gradients of a
/// tensor with several consumers; bf16: the sum of the fp32 values, rounded to
/// nearest even; the CPU takes fp32 only, InternalError otherwise).
void accumulate(const Device& d, DType t, void* y, const void* x, size_t n);

/// The shape to pass the per-(sample, channel) ops (add_channels_forward,
/// channel_sums, scale_channels_*) for a [1, 1, c] input broadcast over a
/// tensor of shape s: s itself when c == s.c; for c == 1 (one value per
/// sample) [N, H*W*C, 1, 1], the same elements as one channel, so that the
/// value's row is the sample.
inline Shape broadcast_rows_shape(Shape s, int c) {
  return c == s.c ? s : Shape{s.n, int(s.sample_numel()), 1, 1};
}

/// y [N, H, W, C] (xs) <- x + s[n, c]: s [N, C] is one value per (sample,
/// channel) broadcast over the pixels (a [1, 1, C] Add input, as Keras
/// broadcasts it). y may be x.
void add_channels_forward(const Device& d, const float* x, const float* s, Shape xs, float* y);
/// out [N, C] <- the sum over the pixels of each (sample, channel) of x
/// [N, H, W, C] (xs), in double in a fixed order, rounded to float (the
/// gradient of add_channels_forward's s).
void channel_sums(const Device& d, const float* x, Shape xs, float* out);

// ---- AveragePooling2D (backend/cpu/avg_pool.cpp) -------------------------

/// y [N, Ho, Wo, C] (ys) <- the mean of each window (p.ph x p.pw, strides
/// p.stride_*) of x [N, H, W, C] (xs) over its pixels inside x, windows
/// placed with TensorFlow's padding (pad_h, pad_w before the input, from
/// conv_padding): avg_pool's 'same', which does not count the padding.
/// Each sum is taken in row-major window order (the same on both devices).
void avg_pool_forward(const Device& d, const float* x, Shape xs, Pool2DParams p, PadPair pad_h, PadPair pad_w,
                      float* y, Shape ys);
/// dx [N, H, W, C] <- for each input pixel, the sum over the windows holding
/// it of dy / (the window's pixel count), in row-major window order
/// (overwrites dx).
void avg_pool_backward(const Device& d, const float* dy, Shape ys, Pool2DParams p, PadPair pad_h, PadPair pad_w,
                       float* dx, Shape xs);

// ---- GlobalAveragePooling2D, GlobalMaxPooling2D (backend/cpu/global_pool.cpp)

/// y [N, C] <- the mean of each (sample, channel) of x [N, H, W, C] (xs) over
/// its H*W pixels: the sum in double, divided by H*W, rounded to float. The
/// order of the sum is fixed on each device (deterministic; the two devices
/// may differ in the last bit).
void global_avg_pool_forward(const Device& d, const float* x, Shape xs, float* y);
/// dx [N, H, W, C] (xs) <- dy[n, c] / (H*W) (fp32 division) at every pixel
/// (overwrites dx).
void global_avg_pool_backward(const Device& d, const float* dy, Shape xs, float* dx);
/// y [N, C] <- the largest of the H*W values of each (sample, channel) of x
/// [N, H, W, C] (xs); NaN when one of them is NaN (tf.reduce_max).
void global_max_pool_forward(const Device& d, const float* x, Shape xs, float* y);
/// dx [N, H, W, C] <- dy[n, c] / k at the k pixels where x equals y[n, c]
/// (the forward's result), 0 elsewhere: ties share the gradient, as
/// tf.reduce_max's gradient and torch.amax's do (overwrites dx).
void global_max_pool_backward(const Device& d, const float* x, Shape xs, const float* y, const float* dy, float* dx);

// ---- PReLU (backend/cpu/prelu.cpp) ---------------------------------------

/// PReLU's slope tensor alpha [ah, aw, ac] (Keras's layout): each dimension
/// the input's size, or 1 where Keras's shared_axes shares it.
struct PReLUShape {
  int ah = 1, aw = 1, ac = 1;
};

/// y [N, H, W, C] (xs) <- prelu_value(x, alpha[h', w', c']) with h' = h when
/// a.ah == H else 0 (likewise w', c'). y may be x.
void prelu_forward(const Device& d, const float* x, Shape xs, const float* alpha, PReLUShape a, float* y);
/// dx <- prelu_dx(x, alpha, dy) (when dx is not nullptr) and dalpha [ah, aw,
/// ac] <- for each slope, the sum of prelu_dalpha_term over the elements
/// that use it (all samples, and the shared positions), in double, summed in
/// a fixed order (overwrites dalpha; skipped when nullptr: a frozen layer).
void prelu_backward(const Device& d, const float* x, Shape xs, const float* alpha, PReLUShape a, const float* dy,
                    float* dx, float* dalpha);

// ---- Multiply (backend/cpu/multiply.cpp) ---------------------------------

/// y [P, C] <- a [P, C] * b, for P = N*H*W pixels: b is [P, C] (cb == C) or
/// [P, 1] (cb == 1, one value per pixel for all C channels, as Keras
/// broadcasts an attention map). y may be a.
void multiply_forward(const Device& d, const float* a, const float* b, int cb, long long P, int C, float* y);
/// The gradients of y = a * b from dy [P, C] (shapes as multiply_forward):
/// da <- dy * b (broadcast as in the forward), when da is not nullptr;
/// db <- dy * a (cb == C) or db[p] <- sum over c of dy[p, c] * a[p, c] in
/// channel order (cb == 1), when db is not nullptr. Neither aliases an input.
void multiply_backward(const Device& d, const float* a, const float* b, int cb, long long P, int C, const float* dy,
                       float* da, float* db);

/// y [N, H, W, C] (xs) <- x * s[n, c]: s [N, C] is one scale per (sample,
/// channel), a [1, 1, C] Multiply input broadcast over height and width as
/// Keras broadcasts it (squeeze-and-excitation, Hu et al. 2018). y may be x.
void scale_channels_forward(const Device& d, const float* x, const float* s, Shape xs, float* y);
/// The gradients of y = x * s[n, c] from dy [N, H, W, C]: dx <- dy * s[n, c]
/// (when dx is not nullptr); ds [N, C] <- the sum over the pixels of dy * x,
/// in double in a fixed order, rounded to float (when ds is not nullptr).
/// Neither aliases an input.
void scale_channels_backward(const Device& d, const float* x, const float* s, Shape xs, const float* dy, float* dx,
                             float* ds);

// ---- Concatenate (backend/cpu/concat.cpp) --------------------------------

/// Channel concatenation of k inputs xs[i] [P, cs[i]] (P = N*H*W pixels) into
/// y [P, cy], cy = sum cs[i], channels in input order, every tensor of type t
/// (the CPU takes fp32 only, InternalError otherwise). The arrays xs and cs
/// are host memory.
void concat_channels_forward(const Device& d, DType t, const void* const* xs, const int* cs, size_t k, long long P,
                             void* y, int cy);
/// The inverse: dxs[i] [P, cs[i]] <- the i-th channel slice of dy [P, cy], of
/// type t; inputs whose dxs[i] is nullptr are skipped. The arrays cs and dxs
/// are host memory.
void concat_channels_backward(const Device& d, DType t, const void* dy, int cy, long long P, const int* cs, size_t k,
                              void* const* dxs);

// ---- UpSampling2D, nearest (backend/cpu/upsample.cpp) --------------------

/// Integer upsampling factors of UpSampling2D.
struct UpSample2DParams {
  int sh = 2, sw = 2;  ///< Factors along height and width.
};

/// y[n, i, j, c] <- x[n, i / sh, j / sw, c]: x [N, H, W, C] (xs), y [N, H*sh, W*sw, C].
void upsample_nearest_forward(const Device& d, const float* x, Shape xs, UpSample2DParams p, float* y);
/// dx [N, H, W, C] (xs) <- the sums of dy [N, H*sh, W*sw, C] over each sh x sw
/// block (overwrites dx).
void upsample_nearest_backward(const Device& d, const float* dy, Shape xs, UpSample2DParams p, float* dx);

// ---- UpSampling2D, bilinear (backend/cpu/upsample_bilinear.cpp) ----------

/// y [N, H*sh, W*sw, C] <- the bilinear interpolation of x [N, H, W, C] (xs)
/// at each output pixel's half-pixel centre, edges clamped (bilinear_tap):
/// lerp(lerp(top-left, top-right, wx), lerp(bottom-left, bottom-right, wx),
/// wy), as TensorFlow's ResizeBilinear. The same bits on both devices.
void upsample_bilinear_forward(const Device& d, const float* x, Shape xs, UpSample2DParams p, float* y);
/// dx [N, H, W, C] (xs) <- for each input pixel, the sum over the output
/// pixels of dy * (its row weight) * (its column weight) (bilinear_weight), in
/// row-major output order (overwrites dx; the same bits on both devices).
void upsample_bilinear_backward(const Device& d, const float* dy, Shape xs, UpSample2DParams p, float* dx);

// ---- Cropping2D (backend/cpu/crop.cpp) -----------------------------------

/// Rows and columns Cropping2D removes from each side of the image.
struct Crop2DParams {
  int top = 0, bottom = 0, left = 0, right = 0;
};

/// y [N, H - top - bottom, W - left - right, C] <- x [N, H, W, C] (xs) from row
/// top and column left on, elements of type t (a plain copy: any type, on
/// either device).
void crop_forward(const Device& d, DType t, const void* x, Shape xs, Crop2DParams p, void* y);
/// dx [N, H, W, C] (xs) <- dy [N, H - top - bottom, W - left - right, C] in
/// the window, 0 in the cropped rows and columns (overwrites dx).
void crop_backward(const Device& d, DType t, const void* dy, Shape xs, Crop2DParams p, void* dx);

// ---- Dropout (backend/cpu/dropout.cpp) -----------------------------------

/// Inverted dropout with a counter-based mask (see elementwise_math.h).
struct DropoutParams {
  uint32_t threshold = 0;  ///< An element is kept when its 24-bit draw is >= threshold = rate * 2^24.
  float scale = 1.f;       ///< 1 / (1 - rate).
  bool per_channel = false;  ///< SpatialDropout2D: one draw per (sample, channel), for all its pixels.
};

/// x, y, mask [N, H, W, C] (s): element e of sample n (channel c = e % C) is
/// kept when dropout_draw(dropout_sample_key(step_key, sample_offset + n), k)
/// passes dropout_keep, with k = e (k = c when p.per_channel); y <- kept ?
/// x * scale : 0 and mask <- kept (0 or 1).
void dropout_forward(const Device& d, const float* x, Shape s, uint64_t step_key, long long sample_offset,
                     DropoutParams p, float* y, uint8_t* mask);
/// dx[i] <- mask[i] ? dy[i] * scale : 0 for n elements.
void dropout_backward(const Device& d, const float* dy, const uint8_t* mask, float scale, float* dx, size_t n);

// ---- GroupNormalization (backend/cpu/group_norm.cpp) ---------------------
// Group normalisation (Wu & He 2018) of x [N, H, W, C] whose channels form
// `groups` groups of C / groups consecutive channels: each (sample, group)'s
// M = H * W * C / groups values are normalised by their own mean and biased
// variance. sums [N, C, 2] (double, 16-byte aligned: a GPU reads its pairs as
// double2; InternalError otherwise) and coef [N, groups, 2] are the caller's
// scratch; per (sample, channel) sums are taken over the pixels in a fixed
// order (CPU: row-major per channel; GPU: sample_channel_reduce.cuh's fixed
// ranges), so each device gives the same result on every run and for any
// batch a sample is part of.

/// mean, istd [N, groups] <- each (sample, group)'s mean and 1 / sqrt(var +
/// epsilon), var = max(sum x^2 / M - mean^2, 0) from double sums.
void group_norm_stats(const Device& d, const float* x, Shape s, int groups, double epsilon, double* sums,
                      float* mean, float* istd);
/// y [N, H, W, C] <- gn_apply(x, mean, istd, gamma[c], beta[c]) (gamma,
/// beta may be nullptr: 1 and 0; y may be x).
void group_norm_apply(const Device& d, const float* x, Shape s, int groups, const float* mean, const float* istd,
                      const float* gamma, const float* beta, float* y);
/// The gradients of group_norm_apply for dy [N, H, W, C], given x and the
/// forward's mean and istd: dgamma[c] <- sum of dy * xhat and dbeta[c] <- sum
/// of dy over the samples and pixels (each skipped when nullptr, overwritten
/// otherwise), and dx <- gn_backward (dx may be dy; skipped when nullptr, and
/// coef then unused).
void group_norm_backward(const Device& d, const float* x, const float* dy, Shape s, int groups, const float* mean,
                         const float* istd, const float* gamma, double* sums, float* coef, float* dgamma,
                         float* dbeta, float* dx);

// ---- LayerNormalization (backend/cpu/layer_norm.cpp) ---------------------
// Layer normalisation (Ba et al. 2016) over the channels of x [N, H, W, C],
// as `rows` = N * H * W rows of C values: each row is normalised by its own
// mean and biased variance. The forward's y is group_norm_apply of x seen as
// [rows, 1, 1, C] with one group (the same statistics layout). Sums are in
// double, each row's over its channels in order; nothing the caller keeps
// (the CPU backward allocates its per-block partials, [rows / 256, C, 2]
// doubles, and the GPU uses the reduction's workspace).

/// mean, istd [rows] <- each row's mean and 1 / sqrt(var + epsilon), var =
/// max(sum x^2 / C - mean^2, 0).
void layer_norm_stats(const Device& d, const float* x, size_t rows, int C, double epsilon, float* mean,
                      float* istd);
/// The gradients of the normalisation for dy [rows, C], given x and the
/// forward's mean and istd: dgamma[c] <- sum over the rows of dy * xhat and
/// dbeta[c] <- sum of dy (each skipped when nullptr, overwritten otherwise;
/// in a fixed order for a given rows: CPU blocks of rows, GPU
/// sample_channel_reduce.cuh over [1, rows, 1, C]), and dx <- gn_backward
/// with the row's means over its channels of gamma dy and gamma dy xhat (dx
/// may be dy; skipped when nullptr).
void layer_norm_backward(const Device& d, const float* x, const float* dy, size_t rows, int C, const float* mean,
                         const float* istd, const float* gamma, float* dgamma, float* dbeta, float* dx);

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
