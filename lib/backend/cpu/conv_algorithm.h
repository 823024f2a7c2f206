#pragma once
// Which oneDNN algorithm a CPU convolution runs. Internal to backend/cpu.
#include "backend/cpu/conv_primitives.h"

namespace trainer::cpu {

/// Whether an fp32 convolution problem is one where oneDNN's Winograd
/// kernels F(4x4, 3x3) (jit_wino_4x3, blocked activations) beat its direct
/// ones counting the reorders from and to NHWC around each pass: a 3x3
/// ungrouped, undilated, stride-1 convolution with 32 or more input and
/// output channels, both multiples of 16 (the kernels' block), on an output
/// of 16 x 16 pixels or more. On AVX-512 (oneDNN 2.6) forward,
/// backward-data and backward-weights with the reorders run 1.3x to 2.8x
/// faster there than on the direct kernels; at 8 x 8 or with 16 channels the
/// transforms and reorders outweigh the saved multiplications (figures and
/// Winograd's rounding: docs/cpu.md).
inline bool winograd_pays(const ConvProblem& pb) {
  if (pb.compute != dnnl::memory::data_type::f32 || pb.weights.size() != 4) return false;
  const auto o = pb.weights[0], i = pb.weights[1];
  const bool k3 = pb.weights[2] == 3 && pb.weights[3] == 3;
  const bool unit = pb.strides[0] == 1 && pb.strides[1] == 1 && pb.dilates[0] == 0 && pb.dilates[1] == 0;
  const bool channels = o >= 32 && i >= 32 && o % 16 == 0 && i % 16 == 0;
  return k3 && unit && channels && pb.dst[2] >= 16 && pb.dst[3] >= 16;
}

}  // namespace trainer::cpu
