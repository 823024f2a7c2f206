#pragma once
// Per-element math of the element-wise backend ops (backend/elementwise_ops.h),
// written once: the CPU loops in backend/cpu/ and the CUDA kernels in
// backend/cuda/ call the same functions (TRAINER_HD is __host__ __device__
// under nvcc), so both devices compute the same expression for every element.
#include <cstdint>
#include <type_traits>

#include "core/math.h"
#include "core/shape.h"

namespace trainer {

/// The activations of Keras's `activation` argument that trainer supports
/// (formulas as keras.activations defines them).
enum class ActivationKind {
  Linear,     ///< x.
  Relu,       ///< max(0, x).
  Sigmoid,    ///< 1 / (1 + e^-x).
  Tanh,       ///< tanh(x).
  Elu,        ///< x for x > 0, else alpha (e^x - 1) (Clevert et al. 2015); alpha > 0.
  Selu,       ///< scale * elu(x) with Klambauer et al. 2017's alpha and scale.
  Softplus,   ///< log(1 + e^x).
  LeakyRelu,  ///< x for x > 0, else alpha x (Maas et al. 2013); alpha >= 0.
  /// min(x, beta) for x > 0, else alpha x: Keras's ReLU(max_value=beta,
  /// negative_slope=alpha); relu6 is beta 6, alpha 0. beta > 0, alpha >= 0.
  ClippedRelu,
  HardSigmoid,  ///< relu6(x + 3) / 6 (Keras 3's hard_sigmoid; Keras 2's was clip(0.2 x + 0.5, 0, 1)).
  Softsign,     ///< x / (1 + |x|).
  Exponential,  ///< e^x.
  // The kinds below are not monotonic, so their gradient is taken from the
  // input x (activation_needs_input).
  Gelu,      ///< x Phi(x) = 0.5 x erfc(-x / sqrt 2) (Hendrycks & Gimpel 2016; Keras's gelu, approximate=False).
  Silu,      ///< x sigmoid(x) (Ramachandran et al. 2017's swish, beta 1; Keras 3's silu, alias swish).
  HardSilu,  ///< x relu6(x + 3) / 6 (Howard et al. 2019's hard swish; Keras 3's hard_silu, alias hard_swish).
  Mish,      ///< x tanh(softplus(x)) (Misra 2019; Keras 3's mish).
};

/// Whether the gradient of kind k is written in terms of its input x rather
/// than its output y (the kinds that are not monotonic: x is not recoverable
/// from y).
TRAINER_HD constexpr bool activation_needs_input(ActivationKind k) {
  return k == ActivationKind::Gelu || k == ActivationKind::Silu || k == ActivationKind::HardSilu ||
         k == ActivationKind::Mish;
}

/// One activation function with its parameters. alpha: Elu's alpha,
/// LeakyRelu's and ClippedRelu's negative slope; beta: ClippedRelu's cap;
/// unused by the others.
struct Activation {
  ActivationKind kind = ActivationKind::Linear;
  float alpha = 0.f;
  float beta = 0.f;
  TRAINER_HD bool linear() const { return kind == ActivationKind::Linear; }
  TRAINER_HD bool is(ActivationKind k) const { return kind == k; }
};

/// SELU's constants (Klambauer et al. 2017, as keras.activations.selu).
constexpr float kSeluAlpha = 1.67326324235437728481f;
constexpr float kSeluScale = 1.05070098735548049342f;

// ---- Activations ---------------------------------------------------------
// The gradients of the monotonic kinds are written in terms of the output
// y = f(x), so backward needs only the layer's output: each such f is strictly
// increasing where it is not constant, which makes x recoverable from y. The
// others (activation_needs_input) take x instead.

/// sqrt(1/2) and 1 / sqrt(2 pi), gelu's constants.
constexpr float kSqrtHalf = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

/// relu(x) = max(0, x) (NaN maps to 0).
TRAINER_HD inline float relu_forward(float x) { return x > 0.f ? x : 0.f; }
/// dL/dx of relu from its output y and dL/dy: dy where y > 0, else 0.
TRAINER_HD inline float relu_backward(float y, float dy) { return y > 0.f ? dy : 0.f; }
/// sigmoid(x), stable for large |x|.
TRAINER_HD inline float sigmoid_forward(float x) { return stable_sigmoid(x); }
/// dL/dx of sigmoid from its output y and dL/dy: dy * y (1 - y).
TRAINER_HD inline float sigmoid_backward(float y, float dy) { return dy * (y * (1.f - y)); }
/// softplus(x) = log(1 + e^x) as max(x, 0) + log(1 + e^-|x|): no overflow.
TRAINER_HD inline float softplus(float x) { return fmaxf(x, 0.f) + log1pf(expf(-fabsf(x))); }

/// f(x) for activation a.
TRAINER_HD inline float activation_value(Activation a, float x) {
  switch (a.kind) {
    case ActivationKind::Linear:
      return x;
    case ActivationKind::Relu:
      return relu_forward(x);
    case ActivationKind::Sigmoid:
      return sigmoid_forward(x);
    case ActivationKind::Tanh:
      return tanhf(x);
    case ActivationKind::Elu:
      return x > 0.f ? x : a.alpha * expm1f(x);
    case ActivationKind::Selu:
      return kSeluScale * (x > 0.f ? x : kSeluAlpha * expm1f(x));
    case ActivationKind::Softplus:
      return softplus(x);
    case ActivationKind::LeakyRelu:
      return x > 0.f ? x : a.alpha * x;
    case ActivationKind::ClippedRelu:
      return x > 0.f ? fminf(x, a.beta) : a.alpha * x;
    case ActivationKind::HardSigmoid:
      return fminf(fmaxf((x + 3.f) / 6.f, 0.f), 1.f);
    case ActivationKind::Softsign:
      return x / (1.f + fabsf(x));
    case ActivationKind::Exponential:
      return expf(x);
    case ActivationKind::Gelu:  // erfc keeps the tail for x << 0, where 1 + erf(x / sqrt 2) cancels
      return 0.5f * x * erfcf(-x * kSqrtHalf);
    case ActivationKind::Silu:
      return x * stable_sigmoid(x);
    case ActivationKind::HardSilu:
      return x * (fminf(fmaxf(x + 3.f, 0.f), 6.f) / 6.f);
    case ActivationKind::Mish:
      return x * tanhf(softplus(x));
  }
  return x;
}

/// dL/dx = dy * f'(x) for activation a, from v and dL/dy, where v is the
/// output y = f(x), or the input x for the kinds with activation_needs_input
/// (whose callers must pass x: the convolution epilogues, which see only y,
/// are never given those kinds).
/// From y: tanh' = 1 - y^2; elu' = 1 (y > 0) or y + alpha; selu' = scale
/// (y > 0) or y + scale * alpha; softplus' = sigmoid(x) = 1 - e^-y; leaky
/// relu' = 1 (y > 0) or alpha; clipped relu' = 0 (y >= beta), 1 (y > 0) or
/// alpha; hard sigmoid' = 1/6 where 0 < y < 1, else 0; softsign' =
/// (1 - |y|)^2; exponential' = y. The derivatives that are differences are
/// clamped at 0, their true bound, so that a y rounded to bf16 (a GPU tower's
/// stored output, 8 significant bits) never flips the gradient's sign; their
/// error is then about 2^-9 |dy| in absolute terms, as sigmoid's y (1 - y).
/// From x: gelu' = Phi(x) + x phi(x) (phi the standard normal density); silu'
/// = s (1 + x (1 - s)), s = sigmoid(x); hard silu' = 0 (x < -3), 1 (x > 3),
/// else (2x + 3) / 6, with TensorFlow's relu6' = 0 at the corners (0 at -3, 1
/// at 3, as hard sigmoid' above); mish' = t + x sigmoid(x) (1 - t^2),
/// t = tanh(softplus(x)).
TRAINER_HD inline float activation_dx(Activation a, float v, float dy) {
  const float y = v, x = v;  // the output, or the input for the kinds that need it
  switch (a.kind) {
    case ActivationKind::Linear:
      return dy;
    case ActivationKind::Relu:
      return relu_backward(y, dy);
    case ActivationKind::Sigmoid:
      return sigmoid_backward(y, dy);
    case ActivationKind::Tanh:
      return dy * fmaxf(1.f - y * y, 0.f);
    case ActivationKind::Elu:
      return y > 0.f ? dy : dy * fmaxf(y + a.alpha, 0.f);
    case ActivationKind::Selu:
      return dy * (y > 0.f ? kSeluScale : fmaxf(y + kSeluScale * kSeluAlpha, 0.f));
    case ActivationKind::Softplus:
      return dy * -expm1f(-y);
    case ActivationKind::LeakyRelu:
      return y > 0.f ? dy : dy * a.alpha;
    case ActivationKind::ClippedRelu:
      return y >= a.beta ? 0.f : (y > 0.f ? dy : dy * a.alpha);
    case ActivationKind::HardSigmoid:
      return y > 0.f && y < 1.f ? dy * (1.f / 6.f) : 0.f;
    case ActivationKind::Softsign: {
      const float m = fmaxf(1.f - fabsf(y), 0.f);
      return dy * (m * m);
    }
    case ActivationKind::Exponential:
      return dy * y;
    case ActivationKind::Gelu:
      return dy * (0.5f * erfcf(-x * kSqrtHalf) + x * kInvSqrt2Pi * expf(-0.5f * x * x));
    case ActivationKind::Silu:  // 1 - s as sigmoid(-x): no cancellation for large x
      return dy * (stable_sigmoid(x) * (1.f + x * stable_sigmoid(-x)));
    case ActivationKind::HardSilu:
      return x <= -3.f ? 0.f : (x >= 3.f ? dy : dy * ((2.f * x + 3.f) / 6.f));
    case ActivationKind::Mish: {
      const float t = tanhf(softplus(x));
      return dy * (t + x * stable_sigmoid(x) * (1.f - t * t));
    }
  }
  return dy;
}

/// Calls f(std::integral_constant<ActivationKind, k>{}) (host code), so that a
/// loop or kernel over many elements is compiled once per kind, with
/// activation_value / activation_dx resolved at compile time.
template <class F>
decltype(auto) with_kind(ActivationKind k, F&& f) {
  using K = ActivationKind;
  switch (k) {
    case K::Relu: return f(std::integral_constant<K, K::Relu>{});
    case K::Sigmoid: return f(std::integral_constant<K, K::Sigmoid>{});
    case K::Tanh: return f(std::integral_constant<K, K::Tanh>{});
    case K::Elu: return f(std::integral_constant<K, K::Elu>{});
    case K::Selu: return f(std::integral_constant<K, K::Selu>{});
    case K::Softplus: return f(std::integral_constant<K, K::Softplus>{});
    case K::LeakyRelu: return f(std::integral_constant<K, K::LeakyRelu>{});
    case K::ClippedRelu: return f(std::integral_constant<K, K::ClippedRelu>{});
    case K::HardSigmoid: return f(std::integral_constant<K, K::HardSigmoid>{});
    case K::Softsign: return f(std::integral_constant<K, K::Softsign>{});
    case K::Exponential: return f(std::integral_constant<K, K::Exponential>{});
    case K::Gelu: return f(std::integral_constant<K, K::Gelu>{});
    case K::Silu: return f(std::integral_constant<K, K::Silu>{});
    case K::HardSilu: return f(std::integral_constant<K, K::HardSilu>{});
    case K::Mish: return f(std::integral_constant<K, K::Mish>{});
    case K::Linear: break;
  }
  return f(std::integral_constant<K, K::Linear>{});
}

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

// ---- Group normalisation (one element of channel c in group g) ------------

/// y = (x - mean) * istd * gamma + beta, mean and istd of the element's (sample, group).
TRAINER_HD inline float gn_apply(float x, float mean, float istd, float gamma, float beta) {
  return (x - mean) * istd * gamma + beta;
}
/// dx = istd * (gamma * dy - k2 - xhat * k3), xhat = (x - mean) * istd, with
/// k2 = mean(gamma * dy) and k3 = mean(gamma * dy * xhat) over the element's
/// (sample, group): the gradient of gn_apply through the group's statistics.
TRAINER_HD inline float gn_backward(float dy, float x, float mean, float istd, float gamma, float k2, float k3) {
  return istd * (gamma * dy - k2 - bn_xhat(x, mean, istd) * k3);
}

// ---- NHWC element coordinates -------------------------------------------

/// The (n, h, w, c) of flat element e of an [N, H, W, C] tensor.
struct NhwcIndex {
  int n, h, w, c;
};
TRAINER_HD inline NhwcIndex nhwc_index(size_t e, int H, int W, int C) {
  NhwcIndex i;
  i.c = int(e % size_t(C));
  e /= size_t(C);
  i.w = int(e % size_t(W));
  e /= size_t(W);
  i.h = int(e % size_t(H));
  i.n = int(e / size_t(H));
  return i;
}

// ---- Bilinear resampling (UpSampling2D's 'bilinear') ---------------------------

/// a * b, a + b, a - b rounded once each, never fused into an FMA (nvcc
/// contracts a * b + c by default; the CPU build has no FMA), so both
/// devices give the same bits.
TRAINER_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
TRAINER_HD inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
TRAINER_HD inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

/// The two input pixels lo <= hi of output pixel o and the weight `frac` of
/// hi (1 - frac of lo), for a resize of `in` pixels to `out` with half-pixel
/// centres: src = (o + 0.5) * (in / out) - 0.5 in float, lo = max(floor(src),
/// 0), hi = min(ceil(src), in - 1), frac = src - floor(src): TensorFlow's
/// ResizeBilinear with half_pixel_centers (tf.image.resize's 'bilinear', and
/// Keras's UpSampling2D(interpolation='bilinear')).
struct BilinearTap {
  int lo, hi;
  float frac;
};
TRAINER_HD inline BilinearTap bilinear_tap(int o, int in, int out) {
  const float scale = float(in) / float(out);
  const float src = sub_rn(mul_rn(float(o) + 0.5f, scale), 0.5f);
  const float f = floorf(src), c = ceilf(src);
  BilinearTap t;
  t.lo = f > 0.f ? int(f) : 0;
  t.hi = c < float(in - 1) ? int(c) : in - 1;
  t.frac = src - f;
  return t;
}
/// a + (b - a) * t, TensorFlow's compute_lerp, rounded as written.
TRAINER_HD inline float bilinear_lerp(float a, float b, float t) { return add_rn(a, mul_rn(sub_rn(b, a), t)); }
/// The output pixels [lo, hi) (of out = in * s) whose interpolation may use
/// input pixel i: a superset of those with bilinear_weight != 0.
TRAINER_HD inline void bilinear_outputs(int i, int s, int out, int& lo, int& hi) {
  lo = (i - 1) * s > 0 ? (i - 1) * s : 0;
  hi = (i + 2) * s < out ? (i + 2) * s : out;
}
/// The weight of input pixel i in output pixel o's interpolation along one
/// axis (both taps counted when they are the same pixel).
TRAINER_HD inline float bilinear_weight(const BilinearTap& t, int i) {
  const float w_lo = t.lo == i ? 1.f - t.frac : 0.f, w_hi = t.hi == i ? t.frac : 0.f;
  return add_rn(w_lo, w_hi);
}

// ---- Per (sample, channel) reductions ----------------------------------------

/// The row (n * C + c) of element e of an NHWC tensor with HWC = H*W*C
/// elements per sample: the index of its (sample, channel) in an [N, C] array.
TRAINER_HD inline size_t sample_channel_row(size_t e, size_t HWC, size_t C) { return e / HWC * C + e % C; }

/// The larger of m and v, NaN when v is NaN (folded over values from -inf, a
/// NaN anywhere gives NaN, as tf.reduce_max).
TRAINER_HD inline float max_keeping_nan(float m, float v) { return (v > m || v != v) ? v : m; }

// ---- PReLU slope indexing ----------------------------------------------------

/// PReLU's slope tensor alpha [ah, aw, ac] (Keras's layout): each dimension
/// the input's size, or 1 where Keras's shared_axes shares it.
struct PReLUShape {
  int ah = 1, aw = 1, ac = 1;
};

/// The index into a slope tensor a of element (h, w, c): each dimension of
/// size 1 is shared (index 0).
TRAINER_HD inline size_t prelu_alpha_index(int h, int w, int c, PReLUShape a) {
  const int ah = a.ah, aw = a.aw, ac = a.ac;
  return (size_t(ah == 1 ? 0 : h) * size_t(aw) + size_t(aw == 1 ? 0 : w)) * size_t(ac) + size_t(ac == 1 ? 0 : c);
}

/// Element m (0 <= m < N*H*W*C / (ah*aw*ac)) of the elements that use slope
/// (i, j, k) of a in an input [N, H, W, C] (xs): their offset, enumerated
/// sample-major, then the shared rows, columns and channels.
TRAINER_HD inline size_t prelu_use_offset(size_t m, int i, int j, int k, PReLUShape a, Shape xs) {
  const int ah = a.ah, aw = a.aw, ac = a.ac, H = xs.h, W = xs.w, C = xs.c;
  const int sc = ac == 1 ? C : 1, sw = aw == 1 ? W : 1, sh = ah == 1 ? H : 1;
  const int c = ac == 1 ? int(m % size_t(sc)) : k;
  m /= size_t(sc);
  const int w = aw == 1 ? int(m % size_t(sw)) : j;
  m /= size_t(sw);
  const int h = ah == 1 ? int(m % size_t(sh)) : i;
  const size_t n = m / size_t(sh);
  return ((n * size_t(H) + size_t(h)) * size_t(W) + size_t(w)) * size_t(C) + size_t(c);
}

// ---- Average pooling (one dimension of a window) -------------------------

/// The input pixels [lo, hi) of output o's window (size k, stride s, pad
/// pixels before the input) inside an input of n pixels: TensorFlow's
/// avg_pool averages over these only (padding is not counted).
TRAINER_HD inline void pool_window(int o, int k, int s, int pad, int n, int& lo, int& hi) {
  const int start = o * s - pad;
  lo = start > 0 ? start : 0;
  hi = start + k < n ? start + k : n;
}

/// The outputs [lo, hi) (of m) whose windows (size k, stride s, pad before)
/// hold input pixel i.
TRAINER_HD inline void pool_outputs(int i, int k, int s, int pad, int m, int& lo, int& hi) {
  const int first = i + pad - k + 1;  // the lowest window start that reaches i
  lo = first > 0 ? (first + s - 1) / s : 0;
  const int last = (i + pad) / s + 1;
  hi = last < m ? last : m;
}

// ---- PReLU ---------------------------------------------------------------

/// PReLU's y for x with slope alpha (Keras: relu(x) - alpha * relu(-x)).
TRAINER_HD inline float prelu_value(float x, float alpha) { return x > 0.f ? x : alpha * x; }
/// dL/dx from dy: 0 at x = 0, as Keras's relu(x) - alpha * relu(-x) differentiates.
TRAINER_HD inline float prelu_dx(float x, float alpha, float dy) {
  return x > 0.f ? dy : (x < 0.f ? alpha * dy : 0.f);
}
/// The element's term of dL/dalpha: dy * min(x, 0).
TRAINER_HD inline float prelu_dalpha_term(float x, float dy) { return x > 0.f ? 0.f : dy * x; }

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
