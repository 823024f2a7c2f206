#pragma once
// The grid-stride launch shared by the element-wise CUDA kernels of
// lib/backend/cuda (activation, scale, add, concat, upsample, dropout, batch
// norm, optimizers). An op describes one element by a functor F with
//   template <class I> __device__ void one(I i) const;   // element i
//   template <class I> __device__ void quad(I j) const;  // elements 4j .. 4j+3 (float4 accesses)
// and launch_elementwise runs it over n elements on a stream: with vec,
// quad(j) for j < n / 4 and one(i) for the n % 4 tail; without, one(i) for
// all. I is uint32_t when n <= 2^31 (cheaper index arithmetic, and no
// overflow since a grid has fewer than 2^31 threads) and size_t otherwise.
// The caller checks the launch with TRAINER_CUDA_CHECK_LAUNCH (it needs the
// kernel's name as a literal; a failed launch throws InternalError naming the
// kernel, the device and the layer) and launches nothing for n == 0. Every op
// assumes the calling thread is bound to its context's GPU
// (DeviceContext::make_current, called by the tower threads).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace trainer::cuda {

/// Threads per block of the grid-stride kernels.
constexpr unsigned kThreads = 256;
/// Most blocks of a grid-stride launch: 8192 x 256 threads fill an H200
/// (132 SMs x 2048 resident threads) several times; larger sizes loop.
constexpr size_t kMaxBlocks = 8192;
/// Largest n indexed with uint32_t (i + grid stride stays below 2^32).
constexpr size_t kMaxIndex32 = size_t(1) << 31;

/// Blocks of kThreads for a grid-stride loop over `items` work items (at least 1 block).
inline unsigned grid_blocks(size_t items) {
  return unsigned(std::max<size_t>(1, std::min((items + kThreads - 1) / kThreads, kMaxBlocks)));
}

/// Whether every pointer is 16-byte aligned, so that float4 accesses are legal.
template <class... T>
bool aligned16(const T*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}

/// The float4 at elements 4j .. 4j+3 of p (p 16-byte aligned).
template <class I>
__device__ inline float4 load4(const float* p, I j) {
  return reinterpret_cast<const float4*>(p)[j];
}
/// Stores v at elements 4j .. 4j+3 of p (p 16-byte aligned).
template <class I>
__device__ inline void store4(float* p, I j, float4 v) {
  reinterpret_cast<float4*>(p)[j] = v;
}

/// An element of a tensor of either storage type (float, or __nv_bfloat16 on
/// a bf16 tower) as the fp32 value the kernels compute with, and back
/// (bf16 rounded to nearest even).
__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) {
  return v;
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// The four bf16 at elements 4j .. 4j+3 of p (p 8-byte aligned) as floats.
template <class I>
__device__ inline float4 load4(const __nv_bfloat16* p, I j) {
  const __nv_bfloat162* q = reinterpret_cast<const __nv_bfloat162*>(p) + size_t(2) * j;
  const float2 a = __bfloat1622float2(q[0]), b = __bfloat1622float2(q[1]);
  return make_float4(a.x, a.y, b.x, b.y);
}
/// Stores v at elements 4j .. 4j+3 of p (p 8-byte aligned), rounded to nearest even.
template <class I>
__device__ inline void store4(__nv_bfloat16* p, I j, float4 v) {
  __nv_bfloat162* q = reinterpret_cast<__nv_bfloat162*>(p) + size_t(2) * j;
  q[0] = __float22bfloat162_rn(make_float2(v.x, v.y));
  q[1] = __float22bfloat162_rn(make_float2(v.z, v.w));
}

/// Runs f over n elements in a grid-stride loop (see the file comment).
template <class I, class F>
__global__ void elementwise_kernel(F f, I n, bool vec) {
  const I start = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x);
  const I stride = I(gridDim.x) * I(blockDim.x);
  I done = 0;
  if (vec) {
    const I quads = n / 4;
    for (I j = start; j < quads; j += stride) f.quad(j);
    done = quads * 4;
  }
  for (I i = done + start; i < n; i += stride) f.one(i);
}

/// Queues elementwise_kernel for f over n > 0 elements on `stream`; float4
/// accesses when vec (the caller has checked alignment and any divisibility
/// the functor needs). The caller checks the launch.
template <class F>
void launch_elementwise(cudaStream_t stream, const F& f, size_t n, bool vec) {
  const unsigned blocks = grid_blocks(vec ? n / 4 + n % 4 : n);
  if (n <= kMaxIndex32)
    elementwise_kernel<uint32_t><<<blocks, kThreads, 0, stream>>>(f, uint32_t(n), vec);
  else
    elementwise_kernel<size_t><<<blocks, kThreads, 0, stream>>>(f, n, vec);
}

}  // namespace trainer::cuda
