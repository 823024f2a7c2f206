#pragma once
// Layout and precision conversions around the cuDNN convolution and pooling
// calls (kernels in tensor_layout.cu, queued on the context's compute stream):
// Keras kernels <-> cuDNN NHWC filters, zero/-inf padding and cropping of NHWC
// tensors, and fp32 <-> bf16. Element types are given as cuDNN data types:
// CUDNN_DATA_FLOAT (float) or CUDNN_DATA_BFLOAT16 (__nv_bfloat16); fp32 -> bf16
// rounds to nearest even. Any other type, or a failed launch, throws
// InternalError naming the device and the layer.
#include <cudnn.h>

#include <cstddef>

#include "backend/cuda/cuda_context.h"
#include "core/shape.h"

namespace trainer::cuda {

/// dst, cuDNN's NHWC filter layout [Cb, kh, kw, Ca] (KRSC) of dst_type <- the
/// Keras kernel src [kh, kw, Ca, Cb] (fp32); khw = kh*kw.
void keras_to_cudnn_filter(CudaContext& ctx, const float* src, int khw, int ca, int cb, void* dst,
                           cudnnDataType_t dst_type);

/// dst, the Keras kernel [kh, kw, Ca, Cb] (fp32) <- src, a cuDNN NHWC filter
/// [Cb, kh, kw, Ca] of src_type (the inverse of keras_to_cudnn_filter).
void cudnn_filter_to_keras(CudaContext& ctx, const void* src, cudnnDataType_t src_type, int khw, int ca, int cb,
                           float* dst);

/// dst [N, dh, dw, C] (dst_type) <- src [N, sh, sw, C] (src_type) moved down by
/// `top` rows and right by `left` columns: dst[n, h, w, c] = src[n, h - top,
/// w - left, c] where that lies inside src, else `fill`. Positive offsets pad,
/// negative ones crop. ss.n == ds.n and ss.c == ds.c.
void reframe_nhwc(CudaContext& ctx, const void* src, cudnnDataType_t src_type, Shape ss, void* dst,
                  cudnnDataType_t dst_type, Shape ds, int top, int left, float fill);

/// dst[i] <- src[i] for i < n, converted from src_type to dst_type.
void convert(CudaContext& ctx, const void* src, cudnnDataType_t src_type, void* dst, cudnnDataType_t dst_type,
             size_t n);

/// Bytes of one element of `type` (4 for CUDNN_DATA_FLOAT, 2 for
/// CUDNN_DATA_BFLOAT16); InternalError for others.
size_t element_size(CudaContext& ctx, cudnnDataType_t type);

}  // namespace trainer::cuda
