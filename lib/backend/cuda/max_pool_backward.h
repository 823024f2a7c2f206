#pragma once
// Max-pooling gradient kernel (max_pool_backward.cu): cuDNN's
// cudnnPoolingBackward on NHWC tensors took 4 ms of a 55 ms U-Net step on an
// H200 for the first 2x2 pooling alone (the first GPU profile), several times
// its memory traffic. Where the windows tile the input (the usual 2x2 stride
// 2 pooling of even sizes) one thread per window writes its gradients; else a
// gather kernel reads each window once per input element. Both write every dx
// once.
#include "backend/cuda/cuda_context.h"
#include "core/shape.h"

namespace trainer::cuda {

/// dx [N, H, W, C] <- the gradient of max pooling without padding (a padded
/// input is passed padded): for each input element, the sum of dy over the
/// windows (kh x kw, strides sh, sw; output ys) whose maximum it is, the
/// maximum of a window being its first element (row-major) equal to y.
/// x, y: the forward's input and output; dy [N, Ho, Wo, C]. Writes every
/// element of dx; queues nothing for empty shapes.
void max_pool_backward(CudaContext& ctx, const float* x, Shape xs, const float* y, const float* dy, Shape ys, int kh,
                       int kw, int sh, int sw, float* dx);

}  // namespace trainer::cuda
