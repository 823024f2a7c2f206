#include "backend/cpu/typed_passes.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/bf16.h"

namespace trainer::cpu {

namespace {

inline float load(const float* p, long long i) { return p[i]; }
inline float load(const uint16_t* p, long long i) { return bf16_to_float(p[i]); }
inline void store(float* p, long long i, float v) { p[i] = v; }
inline void store(uint16_t* p, long long i, float v) { p[i] = float_to_bf16(v); }

/// f(pointer of type t's storage: float* or uint16_t*), for p of type t.
template <class P, class F>
void with_storage(DType t, P* p, F&& f) {
  using Float = std::conditional_t<std::is_const_v<P>, const float, float>;
  using Half = std::conditional_t<std::is_const_v<P>, const uint16_t, uint16_t>;
  if (t == DType::BF16) f(static_cast<Half*>(p));
  else f(static_cast<Float*>(p));
}

/// The loops, one per (activation kind, storage types), flattened (every call
/// inlined: activation_dx and the conversions would otherwise stay calls in
/// the deepest instantiations, and the loop would not vectorize).
/// The Activation is made inside the loop so that its kind is a constant in
/// OpenMP's outlined function (one made outside would be read through a
/// pointer there, and every element would take activation_value's switch).
template <ActivationKind K, class T>
__attribute__((flatten)) void forward_loop(Activation a, T* y, long long m) {
  const float alpha = a.alpha, beta = a.beta;
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) store(y, i, activation_value(Activation{K, alpha, beta}, load(y, i)));
}

template <ActivationKind K, class T, class U>
__attribute__((flatten)) void backward_loop(Activation a, const T* y, const T* dy, U* dz, long long m) {
  const float alpha = a.alpha, beta = a.beta;
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) store(dz, i, activation_dx(Activation{K, alpha, beta}, load(y, i), load(dy, i)));
}

/// ReLU's gradient on bf16 y and dy into bf16 dz, on the bits: dz = dy where
/// y > 0 (bits 0x0001..0x7f80: positive, up to +inf, not NaN), else +0; the
/// same bits as backward_loop's float path, in 16-bit lanes (but for a
/// signalling NaN dy, which passes here unquieted).
void relu_backward_bf16(const uint16_t* y, const uint16_t* dy, uint16_t* dz, long long m) {
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) {
    const int16_t v = int16_t(y[i]);  // signed compares and a mask: what SSE/AVX vectorize on 16-bit lanes
    dz[i] = uint16_t(dy[i] & uint16_t(-int16_t(v > 0 && v <= 0x7f80)));
  }
}

template <class T, class U>
__attribute__((flatten)) void convert_loop(const T* x, U* y, long long m) {
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < m; ++i) store(y, i, load(x, i));
}

}  // namespace

void convert(DType from, const void* x, DType to, void* y, size_t n) {
  if (from == to) return void(std::memcpy(y, x, n * dtype_size(from)));
  const long long m = (long long)n;
  with_storage(from, x, [&](auto in) { with_storage(to, y, [&](auto out) { convert_loop(in, out, m); }); });
}

void typed_activation_forward(Activation a, DType t, void* y, size_t n) {
  if (a.linear()) return;
  const long long m = (long long)n;
  with_kind(a.kind, [&](auto k) { with_storage(t, y, [&](auto v) { forward_loop<decltype(k)::value>(a, v, m); }); });
}

void typed_activation_backward(Activation a, DType t, const void* y, const void* dy, DType out, void* dz, size_t n) {
  if (a.linear()) return convert(t, dy, out, dz, n);
  const long long m = (long long)n;
  if (a.kind == ActivationKind::Relu && t == DType::BF16 && out == DType::BF16)
    return relu_backward_bf16(static_cast<const uint16_t*>(y), static_cast<const uint16_t*>(dy),
                              static_cast<uint16_t*>(dz), m);
  with_kind(a.kind, [&](auto k) {
    with_storage(t, y, [&](auto yv) {
      const auto* g = static_cast<decltype(yv)>(dy);
      with_storage(out, dz, [&](auto dv) { backward_loop<decltype(k)::value>(a, yv, g, dv, m); });
    });
  });
}

}  // namespace trainer::cpu
