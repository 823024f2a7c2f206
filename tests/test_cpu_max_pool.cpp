// MaxPooling2D on the CPU against its definition, on values with many ties
// (+0 and -0 among them): the maximum, and each gradient at the window's
// first maximum in row-major order. 2x2 windows with stride 2 run on the
// backend's own pass (backend/cpu/max_pool_2x2.h), the others on oneDNN; both
// must follow the same rule, which the GPU kernel follows too, and on our
// pass a window holding a NaN gives NaN and no gradient, as on a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/max_pool_2x2.h"
#include "backend/cpu_info.h"
#include "backend/ops.h"
#include "gpu_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// n values from {-1, -0.5, -0, +0, 0.5, 1} (exact in bf16): most windows tie.
std::vector<float> tied_values(size_t n, unsigned seed) {
  const float pick[] = {-1.f, -0.5f, -0.f, 0.f, 0.5f, 1.f};
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = pick[(seed >> 16) % 6];
  }
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct PoolRef {
  std::vector<float> y, dx;
};

/// 'valid' max pooling of x [N, H, W, C] by the definition: y is the first
/// maximum of each window (row-major), which alone receives dy there; a
/// window holding a NaN gives its first NaN and no gradient.
PoolRef pool_reference(const Pool2DParams& p, Shape xs, Shape ys, const std::vector<float>& x,
                       const std::vector<float>& dy) {
  PoolRef r{std::vector<float>(ys.numel()), std::vector<float>(xs.numel(), 0.f)};
  auto at = [](Shape s, int n, int h, int w, int c) { return ((size_t(n) * s.h + h) * s.w + w) * s.c + c; };
  for (int n = 0; n < ys.n; ++n)
    for (int oh = 0; oh < ys.h; ++oh)
      for (int ow = 0; ow < ys.w; ++ow)
        for (int c = 0; c < ys.c; ++c) {
          size_t best = at(xs, n, oh * p.stride_h, ow * p.stride_w, c);
          for (int u = 0; u < p.ph; ++u)
            for (int v = 0; v < p.pw; ++v) {
              const size_t i = at(xs, n, oh * p.stride_h + u, ow * p.stride_w + v, c);
              if (!std::isnan(x[best]) && (x[i] > x[best] || std::isnan(x[i]))) best = i;
            }
          r.y[at(ys, n, oh, ow, c)] = x[best];
          if (!std::isnan(x[best])) r.dx[best] += dy[at(ys, n, oh, ow, c)];
        }
  return r;
}

}  // namespace

TEST_CASE("MaxPooling2D on the CPU takes each window's first maximum, forward and backward", "[conv]") {
  struct Case {
    Pool2DParams p;
    Shape xs, ys;
  };
  Pool2DParams stride1, window3;
  stride1.stride_h = stride1.stride_w = 1;
  window3.ph = window3.pw = 3;
  const Case cases[] = {
      {Pool2DParams{}, {2, 8, 6, 16}, {2, 4, 3, 16}},   // the backend's own pass, vector lanes only
      {Pool2DParams{}, {3, 7, 5, 19}, {3, 3, 2, 19}},   // odd sizes (a row and a column in no window), a lane tail
      {stride1, {2, 5, 4, 3}, {2, 4, 3, 3}},            // oneDNN, overlapping windows
      {window3, {1, 7, 9, 5}, {1, 3, 4, 5}},            // oneDNN, overlapping windows
  };
  const Device cpu{};
  for (const Case& c : cases)
    for (DType t : {DType::F32, DType::BF16}) {
      const bool own = cpu::max_pool_2x2_applies(c.p, c.xs, c.ys);
      if (t == DType::BF16 && !cpu_has_bf16() && !own) continue;  // oneDNN's bf16 pooling wants AVX-512
      INFO(c.p.ph << "x" << c.p.pw << " stride " << c.p.stride_h << " on " << c.xs.nhwc() << " " << dtype_name(t));
      std::vector<float> x = tied_values(c.xs.numel(), 3);
      const std::vector<float> dy = round_bf16(random_values(c.ys.numel(), 4));
      if (own) x[5] = x[c.xs.numel() - 7] = std::nanf("");  // our pass: a NaN wins its window, as on a GPU
      const PoolRef ref = pool_reference(c.p, c.xs, c.ys, x, dy);
      MaxPool2DOp pool(c.p);
      Tensor xt = make_tensor(c.xs, x, cpu, t), yt = make_tensor(c.ys, std::vector<float>(c.ys.numel()), cpu, t);
      Tensor dyt = make_tensor(c.ys, dy, cpu, t), dxt = make_tensor(c.xs, std::vector<float>(c.xs.numel(), 7.f), cpu, t);
      pool.forward(cpu, xt.view(), yt.view(), true);
      pool.backward(cpu, dyt.view(), dxt.view());
      const std::vector<float> dx = download(dxt), y = download(yt);
      if (own) CHECK(same_bits(y, ref.y));  // the first maximum's own bits: +0 or -0, NaN
      else CHECK(y == ref.y);
      const bool overlap = c.p.ph > c.p.stride_h || c.p.pw > c.p.stride_w;
      if (!overlap) CHECK(dx == ref.dx);  // each gradient lands once: exact in either type
      else  // sums of overlapping windows' gradients, rounded in bf16
        for (size_t i = 0; i < dx.size(); ++i) CHECK(dx[i] == Approx(ref.dx[i]).margin(t == DType::BF16 ? 1e-2 : 1e-6));
    }
}
