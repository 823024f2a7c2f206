// Window geometry shared by every backend (formulas from Keras's conv_utils.py
// and TensorFlow's 'SAME' padding rule).
#include <algorithm>

#include "backend/ops.h"

namespace trainer {

int conv_output_length(int in, int k, int stride, bool same) {
  if (same) return (in + stride - 1) / stride;
  if (in < k) return 0;
  return (in - k) / stride + 1;
}

int conv_transpose_output_length(int in, int k, int stride, bool same) {
  const long long grown = (long long)in * stride;
  return checked_side(same ? grown : grown + std::max(k - stride, 0));
}

PadPair conv_padding(int big, int small, int k, int s) {
  int total = std::max((small - 1) * s + k - big, 0);
  return PadPair{total / 2, total - total / 2};
}

}  // namespace trainer
