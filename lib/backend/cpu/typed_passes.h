#pragma once
// Element-wise passes over activations of either type (fp32 or bf16): the
// activations' forward and backward (every fp32 activation of the CPU
// backend too) and the conversions around bf16 convolutions. OpenMP, one
// vectorized loop per activation kind and types; bf16 values are computed in
// fp32 and rounded to nearest even (core/bf16.h). Tensors are flat arrays of
// n elements of the stated DType. Internal to backend/cpu.
#include <cstddef>

#include "backend/elementwise_math.h"
#include "core/dtype.h"

namespace trainer::cpu {

/// y <- x converted from type `from` to type `to` (a copy when they agree).
void convert(DType from, const void* x, DType to, void* y, size_t n);

/// y <- f(y) in place, y of type t (bf16 values are computed in fp32 and rounded).
void typed_activation_forward(Activation a, DType t, void* y, size_t n);

/// dz <- dy * f'(y) (activation_dx from the output y), y and dy of type t,
/// dz of type out: the activation's backward and the conversion in one pass.
/// y is not read for a linear activation.
void typed_activation_backward(Activation a, DType t, const void* y, const void* dy, DType out, void* dz, size_t n);

}  // namespace trainer::cpu
