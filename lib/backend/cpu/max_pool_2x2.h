#pragma once
// 2x2 max pooling with stride 2 and no padding (the U-Net's down-sampling) on
// NHWC tensors of fp32 or bf16, in one pass: the forward reads x once, the
// backward reads x, y and dy once and finds each window's maximum again (its
// first element equal to y, in row-major order within the window, as the
// GPU kernel and oneDNN's workspace choose), so no workspace is kept. oneDNN
// 2.6's pooling took about 5x as long for the small U-Net's shapes
// (bench/unet_throughput --profile). Internal to backend/cpu.
#include "backend/ops.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace trainer::cpu {

/// The tensors of one 2x2 pooling: x [N, H, W, C] and y [N, H / 2, W / 2, C]
/// (rounded down: a last odd row or column of x is outside every window),
/// both of type t (DType::F32: float, DType::BF16: bf16 bits).
struct Pool2x2Tensors {
  DType t = DType::F32;
  Shape xs, ys;
};

/// Whether the pooling p from xs to ys is one these functions compute: a 2x2
/// window, stride 2, no padding.
bool max_pool_2x2_applies(const Pool2DParams& p, Shape xs, Shape ys);

/// y <- the maximum of each 2x2 window of x (exact in either type; NaN
/// where the window holds one, as on a GPU).
void max_pool_2x2_forward(const Pool2x2Tensors& s, const void* x, void* y);

/// dx <- dy at each window's first maximum (x == y there), 0 elsewhere
/// (including a last odd row or column); x and y as the forward had them.
/// dx [N, H, W, C] and dy [N, H / 2, W / 2, C] of type s.t.
void max_pool_2x2_backward(const Pool2x2Tensors& s, const void* x, const void* y, const void* dy, void* dx);

}  // namespace trainer::cpu
