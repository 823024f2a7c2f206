#pragma once
// The steps around a cuDNN convolution that cuDNN's legacy API does not fuse,
// as one pass each (kernels in conv_epilogue.cu, on the compute stream):
//   conv_epilogue   y = act(src + bias): the bias, the activation and, in
//                   bf16, the conversion of the convolution's bf16 output to
//                   fp32, in one read and one write (three or four passes
//                   otherwise: convert, cudnnAddTensor, activation);
//   activation_gradient
//                   g = dy * act'(y) for the backward convolutions, in the
//                   type cuDNN reads (the bf16 conversion in the same pass),
//                   with the bias gradient, the sum of g over N, H, W, taken
//                   on the way: one read of y and dy and one write of g
//                   instead of four passes; the sums are deterministic (fixed
//                   partition, partial sums in double added in a fixed order);
//   bias_gradient   dbias[c] = sum of dy over N, H, W, likewise.
// Failed launches throw InternalError naming the device and the layer.
#include <cudnn.h>

#include "backend/cuda/cuda_context.h"
#include "backend/elementwise_math.h"

namespace trainer::cuda {

/// y [rows, C] (fp32) <- act(src[r, c] + bias[c]); src [rows, C] of src_type
/// (CUDNN_DATA_FLOAT or CUDNN_DATA_BFLOAT16; fp32 src may be y itself); bias
/// [C] fp32 or nullptr (0). Queues nothing when rows * C == 0.
void conv_epilogue(CudaContext& ctx, const void* src, cudnnDataType_t src_type, const float* bias, Activation act,
                   float* y, long long rows, int C);

/// g [rows, C] (g_type: CUDNN_DATA_FLOAT or CUDNN_DATA_BFLOAT16, rounded to
/// nearest) <- dy[r, c] * act'(y[r, c]) (y, the forward's output, and dy
/// [rows, C] fp32; Linear: g = dy and y may be nullptr); g nullptr: not
/// stored. dbias [C] (nullptr: skipped) <- the sum over r of the fp32 values
/// of g, overwriting it; zero when rows == 0. May not run in place (g != dy).
void activation_gradient(CudaContext& ctx, Activation act, const float* y, const float* dy, long long rows, int C,
                         void* g, cudnnDataType_t g_type, float* dbias);

/// dbias [C] <- sum over r < rows of dy[r, c] (dy [rows, C] fp32), overwriting
/// it; zero when rows == 0.
void bias_gradient(CudaContext& ctx, const float* dy, long long rows, int C, float* dbias);

}  // namespace trainer::cuda
