#pragma once
// Keras weight initialisers (tf.keras.initializers), by name:
//   zeros, ones;
//   glorot_uniform  U(-l, l), l = sqrt(6 / (fan_in + fan_out))   (Glorot & Bengio 2010)
//   glorot_normal   truncated normal, stddev sqrt(2 / (fan_in + fan_out)) / 0.87962566
//   he_uniform      U(-l, l), l = sqrt(6 / fan_in)                (He et al. 2015)
//   he_normal       truncated normal, stddev sqrt(2 / fan_in) / 0.87962566
//   lecun_normal    truncated normal, stddev sqrt(1 / fan_in) / 0.87962566
// Truncated normals are cut at two standard deviations, as Keras's are; 0.87962566
// is the stddev of a unit normal truncated there (Keras VarianceScaling).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

/// The initialiser names accepted in configs.
const std::vector<std::string>& initializer_names();

/// Fills out[0..n) for a weight with the given fans, from a generator seeded
/// with seed. Throws InternalError for an unknown name (configs are
/// validated before this is reached).
void initialize(const std::string& name, double fan_in, double fan_out, uint64_t seed, float* out, size_t n);

}  // namespace trainer
