// Convolution epilogue, activation gradient and bias gradient kernels (see conv_epilogue.h).
#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/conv_epilogue.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/partial_sums.h"

namespace trainer::cuda {

namespace {

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

__device__ inline float activate(Activation a, float v) {
  switch (a) {
    case Activation::Relu:
      return relu_forward(v);
    case Activation::Sigmoid:
      return sigmoid_forward(v);
    case Activation::Linear:
      break;
  }
  return v;
}

/// One element per call of the grid-stride launcher: y[i] = act(src[i] + bias[i % C]).
template <class T>
struct Epilogue {
  const T* src;
  const float* bias;
  Activation act;
  float* y;
  int C;
  template <class I>
  __device__ void one(I i) const {
    y[i] = activate(act, to_float(src[i]) + (bias ? bias[i % I(C)] : 0.f));
  }
  template <class I>
  __device__ void quad(I j) const {
    for (int k = 0; k < 4; ++k) one(I(4) * j + I(k));
  }
};

/// Channels per block of the bias reduction and the blocks it aims at.
constexpr int kTile = 32;
constexpr long long kTargetBlocks = 1024;

__device__ inline void store(float* g, size_t i, float v) { g[i] = v; }
__device__ inline void store(__nv_bfloat16* g, size_t i, float v) { g[i] = __float2bfloat16_rn(v); }

/// Block (b, tile) over rows [rows b / parts, rows (b + 1) / parts) and the
/// tile's channels c: v = dy[r, c] * act'(y[r, c]) (dy itself for Linear),
/// stored to g[r, c] (G: float or bf16) when g is not null, and, when partials
/// is not null, partials[c * parts + b] <- the sum of v (fp32 values) over the
/// block's rows, the lanes of the block taking every (kThreads / kTile)-th row
/// and their sums added in lane order.
template <class G>
__global__ void gradient_partials_kernel(Activation act, const float* y, const float* dy, long long rows, int C,
                                         int parts, G* g, double* partials) {
  __shared__ double sums[kThreads];
  const int tx = int(threadIdx.x) % kTile, ty = int(threadIdx.x) / kTile, lanes = int(blockDim.x) / kTile;
  const int c = int(blockIdx.y) * kTile + tx, b = int(blockIdx.x);
  double s = 0.0;
  if (c < C) {
    const long long end = rows * (b + 1) / parts;
    for (long long r = rows * b / parts + ty; r < end; r += lanes) {
      const size_t i = size_t(r) * C + c;
      float v = dy[i];
      if (act == Activation::Relu) v = relu_backward(y[i], v);
      else if (act == Activation::Sigmoid) v = sigmoid_backward(y[i], v);
      if (g) store(g, i, v);
      s += v;
    }
  }
  if (!partials) return;
  sums[threadIdx.x] = s;
  __syncthreads();
  if (ty == 0 && c < C) {
    double total = 0.0;
    for (int l = 0; l < lanes; ++l) total += sums[l * kTile + tx];
    partials[size_t(c) * parts + b] = total;
  }
}

__global__ void to_float_kernel(const double* src, int n, float* dst) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) dst[i] = float(src[i]);
}

}  // namespace

void conv_epilogue(CudaContext& ctx, const void* src, cudnnDataType_t src_type, const float* bias, Activation act,
                   float* y, long long rows, int C) {
  const size_t n = size_t(rows) * size_t(C);
  if (n == 0) return;
  if (src_type == CUDNN_DATA_BFLOAT16) {
    launch_elementwise(ctx.stream(), Epilogue<__nv_bfloat16>{static_cast<const __nv_bfloat16*>(src), bias, act, y, C},
                       n, false);
  } else if (src_type == CUDNN_DATA_FLOAT) {
    launch_elementwise(ctx.stream(), Epilogue<float>{static_cast<const float*>(src), bias, act, y, C}, n, false);
  } else {
    ctx.fail("conv_epilogue", "unsupported source type");
  }
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "conv_epilogue");
}

void activation_gradient(CudaContext& ctx, Activation act, const float* y, const float* dy, long long rows, int C,
                         void* g, cudnnDataType_t g_type, float* dbias) {
  if (C == 0) return;
  if (rows == 0) {
    if (dbias) ctx.zero(dbias, size_t(C) * sizeof(float));
    return;
  }
  if (g && g_type != CUDNN_DATA_FLOAT && g_type != CUDNN_DATA_BFLOAT16)
    ctx.fail("activation_gradient", "unsupported gradient type");
  const int tiles = (C + kTile - 1) / kTile;
  const int parts = int(std::max<long long>(1, std::min<long long>(rows / 64 + 1, kTargetBlocks / tiles + 1)));
  // Partials and the double sums share one workspace request (used within this call only).
  double* partials =
      dbias ? static_cast<double*>(ctx.workspace((size_t(C) * parts + size_t(C)) * sizeof(double))) : nullptr;
  const dim3 grid{unsigned(parts), unsigned(tiles)};
  if (g && g_type == CUDNN_DATA_BFLOAT16)
    gradient_partials_kernel<<<grid, kThreads, 0, ctx.stream()>>>(act, y, dy, rows, C, parts,
                                                                  static_cast<__nv_bfloat16*>(g), partials);
  else
    gradient_partials_kernel<<<grid, kThreads, 0, ctx.stream()>>>(act, y, dy, rows, C, parts, static_cast<float*>(g),
                                                                  partials);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "gradient_partials_kernel");
  if (!dbias) return;
  double* sums = partials + size_t(C) * parts;
  sum_partials(ctx, partials, C, parts, sums);
  to_float_kernel<<<unsigned((C + 255) / 256), 256, 0, ctx.stream()>>>(sums, C, dbias);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "to_float_kernel");
}

void bias_gradient(CudaContext& ctx, const float* dy, long long rows, int C, float* dbias) {
  activation_gradient(ctx, Activation::Linear, nullptr, dy, rows, C, nullptr, CUDNN_DATA_FLOAT, dbias);
}

}  // namespace trainer::cuda
