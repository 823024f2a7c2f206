// Layout and precision conversion kernels of tensor_layout.h: one thread per
// destination element (grid-stride loops), reads gathered from the source.
#include <cuda_bf16.h>

#include <string>

#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/tensor_layout.h"

namespace trainer::cuda {

namespace {

using bf16 = __nv_bfloat16;

/// dst[k, p, c] (KRSC, p < khw) <- src[p, c, k] (Keras [kh, kw, Ca, Cb]).
template <class D>
__global__ void keras_to_cudnn_kernel(const float* src, long long khw, long long ca, long long cb, D* dst) {
  const long long n = khw * ca * cb;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long c = i % ca, p = (i / ca) % khw, k = i / (ca * khw);
    dst[i] = from_float<D>(src[(p * ca + c) * cb + k]);
  }
}

/// dst[p, c, k] (Keras) <- src[k, p, c] (KRSC).
template <class S>
__global__ void cudnn_to_keras_kernel(const S* src, long long khw, long long ca, long long cb, float* dst) {
  const long long n = khw * ca * cb;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long k = i % cb, c = (i / cb) % ca, p = i / (cb * ca);
    dst[i] = to_float(src[(k * khw + p) * ca + c]);
  }
}

template <class S, class D>
__global__ void reframe_kernel(const S* src, int sh, int sw, D* dst, int n, int dh, int dw, int c, int top, int left,
                               float fill) {
  const long long total = (long long)n * dh * dw * c;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long ch = i % c;
    long long t = i / c;
    const int w = int(t % dw);
    t /= dw;
    const int h = int(t % dh);
    const long long b = t / dh;
    const int hs = h - top, ws = w - left;
    const bool inside = hs >= 0 && hs < sh && ws >= 0 && ws < sw;
    dst[i] = inside ? from_float<D>(to_float(src[((b * sh + hs) * sw + ws) * c + ch])) : from_float<D>(fill);
  }
}

template <class S, class D>
__global__ void convert_kernel(const S* src, D* dst, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = from_float<D>(to_float(src[i]));
}

[[noreturn]] void bad_type(CudaContext& ctx, const char* what, cudnnDataType_t type) {
  ctx.fail(what, "unsupported element type " + std::to_string(int(type)) + " (float or bfloat16 expected)");
}

bool is_float(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT; }
bool is_bf16(cudnnDataType_t t) { return t == CUDNN_DATA_BFLOAT16; }

template <class S, class D>
void launch_reframe(CudaContext& ctx, const void* src, Shape ss, void* dst, Shape ds, int top, int left, float fill) {
  reframe_kernel<S, D><<<grid_blocks(size_t(ds.numel())), kThreads, 0, ctx.stream()>>>(
      static_cast<const S*>(src), ss.h, ss.w, static_cast<D*>(dst), ds.n, ds.h, ds.w, ds.c, top, left, fill);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "reframe_kernel");
}

template <class S, class D>
void launch_convert(CudaContext& ctx, const void* src, void* dst, size_t n) {
  convert_kernel<S, D><<<grid_blocks(size_t(n)), kThreads, 0, ctx.stream()>>>(static_cast<const S*>(src),
                                                                                static_cast<D*>(dst), (long long)n);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "convert_kernel");
}

}  // namespace

size_t element_size(CudaContext& ctx, cudnnDataType_t type) {
  if (is_float(type)) return sizeof(float);
  if (is_bf16(type)) return sizeof(bf16);
  bad_type(ctx, "element_size", type);
}

void keras_to_cudnn_filter(CudaContext& ctx, const float* src, int khw, int ca, int cb, void* dst,
                           cudnnDataType_t dst_type) {
  const long long n = (long long)khw * ca * cb;
  if (n == 0) return;
  if (is_float(dst_type))
    keras_to_cudnn_kernel<float>
        <<<grid_blocks(size_t(n)), kThreads, 0, ctx.stream()>>>(src, khw, ca, cb, static_cast<float*>(dst));
  else if (is_bf16(dst_type))
    keras_to_cudnn_kernel<bf16>
        <<<grid_blocks(size_t(n)), kThreads, 0, ctx.stream()>>>(src, khw, ca, cb, static_cast<bf16*>(dst));
  else
    bad_type(ctx, "keras_to_cudnn_filter", dst_type);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "keras_to_cudnn_kernel");
}

void cudnn_filter_to_keras(CudaContext& ctx, const void* src, cudnnDataType_t src_type, int khw, int ca, int cb,
                           float* dst) {
  const long long n = (long long)khw * ca * cb;
  if (n == 0) return;
  if (is_float(src_type))
    cudnn_to_keras_kernel<float>
        <<<grid_blocks(size_t(n)), kThreads, 0, ctx.stream()>>>(static_cast<const float*>(src), khw, ca, cb, dst);
  else if (is_bf16(src_type))
    cudnn_to_keras_kernel<bf16>
        <<<grid_blocks(size_t(n)), kThreads, 0, ctx.stream()>>>(static_cast<const bf16*>(src), khw, ca, cb, dst);
  else
    bad_type(ctx, "cudnn_filter_to_keras", src_type);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "cudnn_to_keras_kernel");
}

void reframe_nhwc(CudaContext& ctx, const void* src, cudnnDataType_t src_type, Shape ss, void* dst,
                  cudnnDataType_t dst_type, Shape ds, int top, int left, float fill) {
  if (ss.n != ds.n || ss.c != ds.c)
    ctx.fail("reframe_nhwc", "source " + ss.nhwc() + " and destination " + ds.nhwc() + " differ in N or C");
  if (ds.numel() == 0) return;
  if (is_float(src_type) && is_float(dst_type))
    launch_reframe<float, float>(ctx, src, ss, dst, ds, top, left, fill);
  else if (is_float(src_type) && is_bf16(dst_type))
    launch_reframe<float, bf16>(ctx, src, ss, dst, ds, top, left, fill);
  else if (is_bf16(src_type) && is_float(dst_type))
    launch_reframe<bf16, float>(ctx, src, ss, dst, ds, top, left, fill);
  else if (is_bf16(src_type) && is_bf16(dst_type))
    launch_reframe<bf16, bf16>(ctx, src, ss, dst, ds, top, left, fill);
  else
    bad_type(ctx, "reframe_nhwc", is_float(src_type) || is_bf16(src_type) ? dst_type : src_type);
}

void convert(CudaContext& ctx, const void* src, cudnnDataType_t src_type, void* dst, cudnnDataType_t dst_type,
             size_t n) {
  if (n == 0) return;
  if (is_float(src_type) && is_float(dst_type))
    launch_convert<float, float>(ctx, src, dst, n);
  else if (is_float(src_type) && is_bf16(dst_type))
    launch_convert<float, bf16>(ctx, src, dst, n);
  else if (is_bf16(src_type) && is_float(dst_type))
    launch_convert<bf16, float>(ctx, src, dst, n);
  else if (is_bf16(src_type) && is_bf16(dst_type))
    launch_convert<bf16, bf16>(ctx, src, dst, n);
  else
    bad_type(ctx, "convert", is_float(src_type) || is_bf16(src_type) ? dst_type : src_type);
}

}  // namespace trainer::cuda
