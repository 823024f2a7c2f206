#include "nn/activation.h"

#include "config/params.h"

namespace trainer {

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = {"linear", "relu", "sigmoid"};
  return names;
}

std::string activation_name(Activation a) { return activation_names()[int(a)]; }

Activation read_activation(ParamReader& p, const std::string& key) {
  std::string s = p.get_string(key, std::string("linear"), activation_names());
  for (size_t i = 0; i < activation_names().size(); ++i)
    if (activation_names()[i] == s) return Activation(i);
  return Activation::Linear;
}

void activation_forward(Activation a, float* y, size_t n) {
  const long long m = (long long)n;
  switch (a) {
    case Activation::Linear:
      return;
    case Activation::Relu:
#pragma omp parallel for simd schedule(static)
      for (long long i = 0; i < m; ++i) y[i] = y[i] > 0.f ? y[i] : 0.f;
      return;
    case Activation::Sigmoid:
#pragma omp parallel for schedule(static)
      for (long long i = 0; i < m; ++i) y[i] = stable_sigmoid(y[i]);
      return;
  }
}

void activation_backward(Activation a, const float* y, float* dy, size_t n) {
  const long long m = (long long)n;
  switch (a) {
    case Activation::Linear:
      return;
    case Activation::Relu:
#pragma omp parallel for simd schedule(static)
      for (long long i = 0; i < m; ++i) dy[i] = y[i] > 0.f ? dy[i] : 0.f;
      return;
    case Activation::Sigmoid:
#pragma omp parallel for simd schedule(static)
      for (long long i = 0; i < m; ++i) dy[i] *= y[i] * (1.f - y[i]);
      return;
  }
}

}  // namespace trainer
