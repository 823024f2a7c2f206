#pragma once
// The steps around a cuDNN convolution that cuDNN's legacy API does not fuse,
// as one pass each (kernels in conv_epilogue.cu, on the compute stream):
//   conv_epilogue   y = act(src + bias): the bias, the activation and, in
//                   bf16, the conversion of the convolution's bf16 output to
//                   fp32, in one read and one write (three or four passes
//                   otherwise: convert, cudnnAddTensor, activation);
//   bias_gradient   dbias[c] = sum of dy over N, H, W, deterministic (fixed
//                   partition, partial sums in double added in a fixed order).
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

/// dbias [C] <- sum over r < rows of dy[r, c] (dy [rows, C] fp32), overwriting
/// it; zero when rows == 0.
void bias_gradient(CudaContext& ctx, const float* dy, long long rows, int C, float* dbias);

}  // namespace trainer::cuda
