// Dropout (keras.layers.Dropout), inverted dropout: in training each element is
// kept with probability 1 - rate and scaled by 1 / (1 - rate), else zeroed; in
// inference y = x. YAML: {type: Dropout, rate: 0.1 (required, [0, 1)), seed: 7}.
//
// The mask is a pure function of (run seed ctx.seed, layer seed, ctx.step,
// global sample index ctx.sample_offset + n, element index within the sample),
// computed with the splitmix64 mixing function (Steele, Lea & Flood 2014) as a
// counter-based generator, so a global batch gets the same masks however it is
// split across towers. The layer seed is 'seed' when given, else a 64-bit
// FNV-1a hash of the layer's name.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "nn/registry.h"

namespace trainer {

namespace {

/// splitmix64's output function: a bijective 64-bit mixer.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// 64-bit FNV-1a of s.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ULL;
  return h;
}

class Dropout : public Layer {
 public:
  Dropout(std::string name, double rate, uint64_t seed)
      : Layer(std::move(name)),
        seed_(seed),
        threshold_(uint32_t(std::llround(rate * double(1u << 24)))),
        scale_(float(1.0 / (1.0 - rate))) {}
  std::string type() const override { return "Dropout"; }
  /// Inference drops nothing: the identity.
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::Identity;
    return d;
  }

  /// One input; same shape out. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("Dropout takes exactly 1 input, got " + std::to_string(inputs.size()));
    return inputs[0];
  }

  /// Training: y = x * mask / (1 - rate), the mask is kept for backward.
  /// Inference (or rate 0): y = x.
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    masked_ = ctx.training && threshold_ > 0;
    if (!masked_) {
      y = *x[0];
      return;
    }
    const Shape s = x[0]->shape();
    y.resize(s);
    mask_.resize(s.numel());
    const size_t per = s.sample_numel();
    const uint64_t base = mix64(mix64(mix64(ctx.seed) ^ seed_) ^ ctx.step);
    constexpr size_t kBlock = 4096;
    const long long blocks = (long long)((per + kBlock - 1) / kBlock);
    const uint32_t thr = threshold_;
    const float scale = scale_;
    const float* in = x[0]->data();
    float* out = y.data();
    uint8_t* mask = mask_.data();
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s.n; ++n)
      for (long long b = 0; b < blocks; ++b) {
        const uint64_t key = mix64(base ^ uint64_t(ctx.sample_offset + n));
        const size_t off = size_t(n) * per;
        const size_t end = std::min(per, size_t(b + 1) * kBlock);
        for (size_t e = size_t(b) * kBlock; e < end; ++e) {
          // Element e's draw: the (e+1)-th output of a splitmix64 stream seeded with key.
          const uint32_t u = uint32_t(mix64(key + (e + 1) * 0x9e3779b97f4a7c15ULL) >> 40);
          const uint8_t keep = u >= thr;
          mask[off + e] = keep;
          out[off + e] = keep ? in[off + e] * scale : 0.f;
        }
      }
  }

  /// dx = dy * mask / (1 - rate) after a training forward, else dx = dy.
  void backward(const Context&, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    if (!masked_) {
      *dx[0] = dy;
      return;
    }
    dx[0]->resize(x[0]->shape());
    const float* g = dy.data();
    const uint8_t* mask = mask_.data();
    float* out = dx[0]->data();
    const float scale = scale_;
    const long long m = (long long)dy.numel();
#pragma omp parallel for simd schedule(static)
    for (long long i = 0; i < m; ++i) out[i] = mask[i] ? g[i] * scale : 0.f;
  }

 private:
  uint64_t seed_;
  uint32_t threshold_;  ///< An element is kept when its 24-bit draw is >= threshold_ = rate * 2^24.
  float scale_;
  bool masked_ = false;  ///< Whether the last forward applied a mask.
  std::vector<uint8_t> mask_;
};

}  // namespace

std::unique_ptr<Layer> make_dropout(ParamReader& p, const std::string& name) {
  double rate = p.get_double("rate", std::nullopt, 0.0, 1.0);
  if (rate >= 1.0) p.fail("rate", "must be below 1 (a rate of 1 drops everything). Use a value in [0, 1)");
  uint64_t seed = p.has("seed") ? uint64_t(int64_t(p.get_int("seed", std::nullopt))) : fnv1a(name);
  return std::make_unique<Dropout>(name, rate, seed);
}

}  // namespace trainer
