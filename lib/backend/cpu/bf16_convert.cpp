#include "backend/cpu/bf16_convert.h"

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

}  // namespace

void convert(DType from, const void* x, DType to, void* y, size_t n) {
  if (from == to) return void(std::memcpy(y, x, n * dtype_size(from)));
  const long long m = (long long)n;
  with_storage(from, x, [&](auto in) {
    with_storage(to, y, [&](auto out) {
#pragma omp parallel for simd schedule(static)
      for (long long i = 0; i < m; ++i) store(out, i, load(in, i));
    });
  });
}

void typed_activation_forward(Activation a, DType t, void* y, size_t n) {
  if (a.linear()) return;
  const long long m = (long long)n;
  with_kind(a.kind, [&](auto k) {
    const Activation f{k, a.alpha, a.beta};
    with_storage(t, y, [&](auto v) {
#pragma omp parallel for simd schedule(static)
      for (long long i = 0; i < m; ++i) store(v, i, activation_value(f, load(v, i)));
    });
  });
}

void typed_activation_backward(Activation a, DType t, const void* y, const void* dy, DType out, void* dz, size_t n) {
  if (a.linear()) return convert(t, dy, out, dz, n);
  const long long m = (long long)n;
  with_kind(a.kind, [&](auto k) {
    const Activation f{k, a.alpha, a.beta};
    with_storage(t, y, [&](auto yv) {
      const auto* g = static_cast<decltype(yv)>(dy);
      with_storage(out, dz, [&](auto dv) {
#pragma omp parallel for simd schedule(static)
        for (long long i = 0; i < m; ++i) store(dv, i, activation_dx(f, load(yv, i), load(g, i)));
      });
    });
  });
}

}  // namespace trainer::cpu
