#include "nn/initializers.h"
#include "core/error.h"

#include <cmath>
#include <random>
#include <stdexcept>

namespace trainer {

const std::vector<std::string>& initializer_names() {
  static const std::vector<std::string> names = {"glorot_uniform", "glorot_normal", "he_uniform",
                                                 "he_normal",      "lecun_normal",  "zeros",
                                                 "ones"};
  return names;
}

static void uniform(std::mt19937_64& rng, float limit, float* out, size_t n) {
  std::uniform_real_distribution<float> u(-limit, limit);
  for (size_t i = 0; i < n; ++i) out[i] = u(rng);
}

static void truncated_normal(std::mt19937_64& rng, float stddev, float* out, size_t n) {
  std::normal_distribution<float> d(0.f, stddev);
  for (size_t i = 0; i < n; ++i) {
    float v;
    do v = d(rng);
    while (std::abs(v) > 2.f * stddev);
    out[i] = v;
  }
}

void initialize(const std::string& name, double fan_in, double fan_out, uint64_t seed, float* out, size_t n) {
  constexpr float kTruncStd = 0.87962566103423978f;
  std::mt19937_64 rng(seed);
  const float fi = float(fan_in), fo = float(fan_out);
  if (name == "zeros" || name == "ones") {
    for (size_t i = 0; i < n; ++i) out[i] = name == "ones" ? 1.f : 0.f;
  } else if (name == "glorot_uniform") {
    uniform(rng, std::sqrt(6.f / (fi + fo)), out, n);
  } else if (name == "he_uniform") {
    uniform(rng, std::sqrt(6.f / fi), out, n);
  } else if (name == "glorot_normal") {
    truncated_normal(rng, std::sqrt(2.f / (fi + fo)) / kTruncStd, out, n);
  } else if (name == "he_normal") {
    truncated_normal(rng, std::sqrt(2.f / fi) / kTruncStd, out, n);
  } else if (name == "lecun_normal") {
    truncated_normal(rng, std::sqrt(1.f / fi) / kTruncStd, out, n);
  } else {
    throw InternalError("unknown initializer '" + name + "'");
  }
}

}  // namespace trainer
