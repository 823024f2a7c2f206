#pragma once
// ReLU's gradient written straight into oneDNN's channel-blocked layout
// nChw16c (tag aBcd16b: [N, C / 16, H, W, 16]), the layout its Winograd
// convolutions read dz in: one pass over y and dy instead of the gradient
// pass in NHWC and a reorder of its result. Internal to backend/cpu.
#include "core/shape.h"

namespace trainer::cpu {

/// dz[n, c / 16, h, w, c % 16] <- relu_backward(y, dy) at [n, h, w, c]
/// (dy where y > 0, else 0; backend/elementwise_math.h), for y and dy
/// [N, H, W, C] NHWC fp32 and s.c a multiple of 16.
void relu_gradient_to_nchw16c(const float* y, const float* dy, Shape s, float* dz);

}  // namespace trainer::cpu
