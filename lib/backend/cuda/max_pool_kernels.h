#pragma once
// Max-pooling kernels (max_pool_kernels.cu), on fp32 or bf16 NHWC tensors, for
// an input already padded as TensorFlow pads (with -inf, by the caller), so
// that every window lies inside it.
// Forward: one thread per output element takes the maximum of its window
// (NaN propagates, as cuDNN's CUDNN_PROPAGATE_NAN); ours rather than
// cudnnPoolingForward so that fp32 and bf16 run one code path whose types
// we control.
// Backward: cuDNN's cudnnPoolingBackward on NHWC tensors took 4 ms of a 55 ms
// U-Net step on an H200 for the first 2x2 pooling alone (the first GPU
// profile), several times its memory traffic. Where the windows tile the
// input (the usual 2x2 stride 2 pooling of even sizes) one thread per window
// writes its gradients; else a gather kernel reads each window once per input
// element. Both write every dx once.
#include "backend/cuda/cuda_context.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace trainer::cuda {

/// y [N, Ho, Wo, C] <- the maximum of each kh x kw window (strides sh, sw) of
/// x [N, H, W, C] without padding (Ho = (H - kh) / sh + 1, likewise Wo), NaN
/// when the window holds one; both of type t. Queues nothing for empty shapes.
void max_pool_forward(CudaContext& ctx, DType t, const void* x, Shape xs, void* y, Shape ys, int kh, int kw, int sh,
                      int sw);

/// dx [N, H, W, C] <- the gradient of max pooling without padding (a padded
/// input is passed padded): for each input element, the sum of dy over the
/// windows (kh x kw, strides sh, sw; output ys) whose maximum it is, the
/// maximum of a window being its first element (row-major) equal to y.
/// x, y: the forward's input and output; dy [N, Ho, Wo, C]; every tensor of
/// type t (bf16 sums of overlapping windows are taken in fp32 and rounded to
/// nearest even). Writes every element of dx; queues nothing for empty shapes.
void max_pool_backward(CudaContext& ctx, DType t, const void* x, Shape xs, const void* y, const void* dy, Shape ys,
                       int kh, int kw, int sh, int sw, void* dx);

}  // namespace trainer::cuda
