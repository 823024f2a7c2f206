#pragma once
// The steps around a cuDNN convolution that cuDNN's legacy API does not fuse,
// as one pass each (kernels in conv_epilogue.cu, on the compute stream):
//   conv_epilogue   y = act(src + bias): the bias, the activation and any
//                   conversion between the convolution's output type and
//                   the layer's, in one read and one write (three or four
//                   passes otherwise: convert, cudnnAddTensor, activation);
//   activation_gradient
//                   g = dy * act'(y) for the backward convolutions, in the
//                   type cuDNN reads (the bf16 conversion in the same pass),
//                   with the bias gradient, the sum of g over N, H, W, taken
//                   on the way: one read of y and dy and one write of g
//                   instead of four passes, each thread taking 16 bytes of
//                   channels where C and the pointers allow; the sums are
//                   deterministic (fixed partition, partial sums in double
//                   added in a fixed order; the partition a function of the
//                   shape and of whether the pointers are 16-byte aligned,
//                   which a layer's allocator-made buffers always are);
//   bias_gradient   dbias[c] = sum of dy over N, H, W, likewise.
// Failed launches throw InternalError naming the device and the layer.
#include <cudnn.h>

#include "backend/cuda/cuda_context.h"
#include "backend/elementwise_math.h"

namespace trainer::cuda {

/// y [rows, C] of y_type <- act(src[r, c] + bias[c]), computed in fp32 and
/// rounded to nearest even for bf16; src [rows, C] of src_type (each type
/// CUDNN_DATA_FLOAT or CUDNN_DATA_BFLOAT16; src may be y itself when the
/// types are equal); bias [C] fp32 or nullptr (0). Queues nothing when
/// rows * C == 0; InternalError for another type, or for an act whose
/// gradient needs its input (activation_needs_input: the layers apply those).
void conv_epilogue(CudaContext& ctx, const void* src, cudnnDataType_t src_type, const float* bias, Activation act,
                   void* y, cudnnDataType_t y_type, long long rows, int C);

/// g [rows, C] (g_type, rounded to nearest even for bf16) <- dy[r, c] *
/// act'(y[r, c]) computed in fp32 (y, the forward's output, and dy [rows, C]
/// of y_type; Linear: g = dy and y may be nullptr); g nullptr: not stored.
/// dbias [C] (nullptr: skipped) <- the sum over r of the fp32 values of
/// dy * act'(y) (before g's rounding), overwriting it; zero when rows == 0.
/// Types CUDNN_DATA_FLOAT or CUDNN_DATA_BFLOAT16 (InternalError otherwise, and
/// for an act whose gradient needs its input). May not run in place (g != dy).
void activation_gradient(CudaContext& ctx, Activation act, const void* y, const void* dy, cudnnDataType_t y_type,
                         long long rows, int C, void* g, cudnnDataType_t g_type, float* dbias);

/// dbias [C] <- sum over r < rows of dy[r, c] (dy [rows, C] of dy_type),
/// overwriting it; zero when rows == 0.
void bias_gradient(CudaContext& ctx, const void* dy, cudnnDataType_t dy_type, long long rows, int C, float* dbias);

}  // namespace trainer::cuda
