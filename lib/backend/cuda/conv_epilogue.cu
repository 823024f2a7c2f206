// Convolution epilogue, activation gradient and bias gradient kernels (see conv_epilogue.h).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/conv_epilogue.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/partial_sums.h"

namespace trainer::cuda {

namespace {

/// y[i] = act(src[i] + bias[i % C]) for the grid-stride launcher (S, Y:
/// float or __nv_bfloat16; act of kind K with alpha and beta), four elements per
/// quad() call where C % 4 == 0.
template <class S, class Y, ActivationKind K>
struct Epilogue {
  const S* src;
  const float* bias;
  float alpha, beta;
  Y* y;
  int C;
  __device__ float activation_value(float v) const { return trainer::activation_value(Activation{K, alpha, beta}, v); }
  template <class I>
  __device__ void one(I i) const {
    y[i] = from_float<Y>(activation_value(to_float(src[i]) + (bias ? bias[i % I(C)] : 0.f)));
  }
  /// Elements 4j .. 4j+3: one channel quad (C % 4 == 0), 16- or 8-byte accesses.
  template <class I>
  __device__ void quad(I j) const {
    const int c = int((I(4) * j) % I(C));
    float4 v = load4(src, j);
    if (bias) v.x += bias[c], v.y += bias[c + 1], v.z += bias[c + 2], v.w += bias[c + 3];
    store4(y, j, make_float4(activation_value(v.x), activation_value(v.y), activation_value(v.z), activation_value(v.w)));
  }
};

/// Channels per block of the bias reduction and the blocks it aims at.
constexpr int kTile = 32;
constexpr long long kTargetBlocks = 1024;

/// Block (b, tile) over rows [rows b / parts, rows (b + 1) / parts) and the
/// tile's channels c: v = dy[r, c] * act'(y[r, c]) (act of kind K with alpha and beta;
/// dy itself for Linear; Y,
/// y's and dy's type, and G, g's: float or bf16), stored to g[r, c] when g
/// is not null, and, when partials is not null, partials[c * parts + b] <-
/// the sum of v (fp32 values) over the block's rows, the lanes of the block
/// taking every (kThreads / kTile)-th row and their sums added in lane order.
template <ActivationKind K, class Y, class G>
__global__ void gradient_partials_kernel(float alpha, float beta, const Y* y, const Y* dy, long long rows, int C,
                                         int parts, G* g, double* partials) {
  const Activation act{K, alpha, beta};
  __shared__ double sums[kThreads];
  const int tx = int(threadIdx.x) % kTile, ty = int(threadIdx.x) / kTile, lanes = int(blockDim.x) / kTile;
  const int c = int(blockIdx.y) * kTile + tx, b = int(blockIdx.x);
  double s = 0.0;
  if (c < C) {
    const long long end = rows * (b + 1) / parts;
    for (long long r = rows * b / parts + ty; r < end; r += lanes) {
      const size_t i = size_t(r) * C + c;
      float v = to_float(dy[i]);
      if (!act.linear()) v = activation_dx(act, to_float(y[i]), v);
      if (g) g[i] = from_float<G>(v);
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

/// V consecutive elements of T read or written as one aligned access.
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

/// gradient_partials_kernel with each thread taking V consecutive channels
/// (a group; one 16-byte load of y and of dy, C % V == 0, the pointers
/// aligned to a Pack): block (b, tile) covers the rows of range b and the
/// groups tile * tg + gx, gx < tg, the kThreads / tg lanes of each group
/// taking every lanes-th row and their sums added in lane order (V tg
/// threads adding one channel's each). A warp thus
/// reads whole rows of C <= 32 V channels at once (16 bytes a thread) where
/// the one-channel kernel reads 2 or 4 bytes a thread.
template <ActivationKind K, class Y, class G, int V>
__global__ void gradient_partials_vec_kernel(float alpha, float beta, const Y* y, const Y* dy, long long rows, int C,
                                             int tg, int parts, G* g, double* partials) {
  const Activation act{K, alpha, beta};
  __shared__ double sums[V * kThreads];
  const int gx = int(threadIdx.x) % tg, ty = int(threadIdx.x) / tg, lanes = int(blockDim.x) / tg;
  const int group = int(blockIdx.y) * tg + gx, b = int(blockIdx.x);
  double s[V] = {};
  if (group < C / V) {
    const long long end = rows * (b + 1) / parts;
    for (long long r = rows * b / parts + ty; r < end; r += lanes) {
      const size_t i = size_t(r) * size_t(C) + size_t(group) * V;
      const Pack<Y, V> d = *reinterpret_cast<const Pack<Y, V>*>(dy + i);
      Pack<Y, V> yv{};
      if (!act.linear()) yv = *reinterpret_cast<const Pack<Y, V>*>(y + i);
      Pack<G, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        float v = to_float(d.v[k]);
        if (!act.linear()) v = activation_dx(act, to_float(yv.v[k]), v);
        out.v[k] = from_float<G>(v);
        s[k] += v;
      }
      if (g) *reinterpret_cast<Pack<G, V>*>(g + i) = out;
    }
  }
  if (!partials) return;
#pragma unroll
  for (int k = 0; k < V; ++k) sums[k * kThreads + threadIdx.x] = s[k];
  __syncthreads();
  // Thread t < V tg adds channel k = t / tg of group t % tg over the lanes, in lane order.
  const int t = int(threadIdx.x), k = t / tg, sum_group = int(blockIdx.y) * tg + t % tg;
  if (t >= V * tg || sum_group >= C / V) return;
  double total = 0.0;
  for (int l = 0; l < lanes; ++l) total += sums[k * kThreads + l * tg + t % tg];
  partials[size_t(sum_group * V + k) * parts + b] = total;
}

__global__ void to_float_kernel(const double* src, int n, float* dst) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) dst[i] = float(src[i]);
}

/// The rows of the bias reduction's blocks: enough ranges to give about
/// kTargetBlocks blocks over `tiles` channel tiles, at least 64 rows each.
int gradient_parts(long long rows, int tiles) {
  return int(std::max<long long>(1, std::min<long long>(rows / 64 + 1, kTargetBlocks / tiles + 1)));
}

/// The bias reduction's partial sums: [C][parts] then room for the C sums
/// (in the context's workspace), or none.
struct Partials {
  double* data = nullptr;
  int parts = 0;
};

/// Queues the activation gradient of y and dy of type Y into g of g_type,
/// with the bias reduction's partials when `sums` (gradient_parts ranges), V
/// channels a thread (gradient_partials_vec_kernel) where C % V == 0 and the
/// tensors are aligned for it, else one (gradient_partials_kernel).
template <class Y>
Partials launch_gradient_partials(CudaContext& ctx, Activation act, const void* y, const void* dy, long long rows,
                                  int C, void* g, cudnnDataType_t g_type, bool sums) {
  constexpr int V = 16 / int(sizeof(Y));
  const Y *yy = static_cast<const Y*>(y), *dyy = static_cast<const Y*>(dy);
  const bool bf16_g = g && g_type == CUDNN_DATA_BFLOAT16;
  const size_t g_pack = size_t(V) * (bf16_g ? 2 : 4);
  const auto aligned = [](const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  const bool vec = C % V == 0 && aligned(dy, 16) && (act.linear() || aligned(y, 16)) && (!g || aligned(g, g_pack));
  int tg = 1;
  if (vec)
    while (tg * 2 <= std::min(C / V, 32)) tg *= 2;
  const int tiles = vec ? (C / V + tg - 1) / tg : (C + kTile - 1) / kTile;
  const int parts = gradient_parts(rows, tiles);
  // The partials and the C sums share one workspace request (used within the caller's call only).
  double* partials =
      sums ? static_cast<double*>(ctx.workspace((size_t(C) * parts + size_t(C)) * sizeof(double))) : nullptr;
  const dim3 grid{unsigned(parts), unsigned(tiles)};
  with_kind(act.kind, [&](auto k) {
    constexpr ActivationKind K = decltype(k)::value;
    if constexpr (activation_needs_input(K)) {  // never fused (the layers apply these, nn/layers/kept_activation.h)
      ctx.fail("activation_gradient", "an activation whose gradient needs its input");
    } else if (vec && bf16_g) {
      gradient_partials_vec_kernel<K, Y, __nv_bfloat16, V><<<grid, kThreads, 0, ctx.stream()>>>(
          act.alpha, act.beta, yy, dyy, rows, C, tg, parts, static_cast<__nv_bfloat16*>(g), partials);
    } else if (vec) {
      gradient_partials_vec_kernel<K, Y, float, V><<<grid, kThreads, 0, ctx.stream()>>>(
          act.alpha, act.beta, yy, dyy, rows, C, tg, parts, static_cast<float*>(g), partials);
    } else if (bf16_g) {
      gradient_partials_kernel<K><<<grid, kThreads, 0, ctx.stream()>>>(act.alpha, act.beta, yy, dyy, rows, C, parts,
                                                                       static_cast<__nv_bfloat16*>(g), partials);
    } else {
      gradient_partials_kernel<K><<<grid, kThreads, 0, ctx.stream()>>>(act.alpha, act.beta, yy, dyy, rows, C, parts,
                                                                       static_cast<float*>(g), partials);
    }
  });
  return Partials{partials, parts};
}

/// Queues Epilogue<S, Y, act's kind> over n elements.
template <class S, class Y>
void launch_epilogue(CudaContext& ctx, const void* src, const float* bias, Activation act, void* y, int C, size_t n) {
  // quad() needs whole channel quads and aligned vector accesses.
  const bool vec = C % 4 == 0 && aligned16(src, y);
  with_kind(act.kind, [&](auto k) {
    constexpr ActivationKind K = decltype(k)::value;
    if constexpr (activation_needs_input(K)) {  // applied by the layers after a linear epilogue
      ctx.fail("conv_epilogue", "an activation whose gradient needs its input");
    } else {
      using E = Epilogue<S, Y, K>;
      launch_elementwise(ctx.stream(), E{static_cast<const S*>(src), bias, act.alpha, act.beta, static_cast<Y*>(y), C},
                         n, vec);
    }
  });
}

bool supported(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_BFLOAT16; }

}  // namespace

void conv_epilogue(CudaContext& ctx, const void* src, cudnnDataType_t src_type, const float* bias, Activation act,
                   void* y, cudnnDataType_t y_type, long long rows, int C) {
  const size_t n = size_t(rows) * size_t(C);
  if (n == 0) return;
  if (!supported(src_type) || !supported(y_type)) ctx.fail("conv_epilogue", "unsupported tensor type");
  const bool bf16_in = src_type == CUDNN_DATA_BFLOAT16, bf16_out = y_type == CUDNN_DATA_BFLOAT16;
  if (bf16_in && bf16_out) launch_epilogue<__nv_bfloat16, __nv_bfloat16>(ctx, src, bias, act, y, C, n);
  else if (bf16_in) launch_epilogue<__nv_bfloat16, float>(ctx, src, bias, act, y, C, n);
  else if (bf16_out) launch_epilogue<float, __nv_bfloat16>(ctx, src, bias, act, y, C, n);
  else launch_epilogue<float, float>(ctx, src, bias, act, y, C, n);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "conv_epilogue");
}

void activation_gradient(CudaContext& ctx, Activation act, const void* y, const void* dy, cudnnDataType_t y_type,
                         long long rows, int C, void* g, cudnnDataType_t g_type, float* dbias) {
  if (C == 0) return;
  if (rows == 0) {
    if (dbias) ctx.zero(dbias, size_t(C) * sizeof(float));
    return;
  }
  if ((g && !supported(g_type)) || !supported(y_type)) ctx.fail("activation_gradient", "unsupported tensor type");
  const Partials p =
      y_type == CUDNN_DATA_BFLOAT16
          ? launch_gradient_partials<__nv_bfloat16>(ctx, act, y, dy, rows, C, g, g_type, dbias != nullptr)
          : launch_gradient_partials<float>(ctx, act, y, dy, rows, C, g, g_type, dbias != nullptr);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "gradient_partials_kernel");
  if (!dbias) return;
  double* sums = p.data + size_t(C) * p.parts;
  sum_partials(ctx, p.data, C, p.parts, sums);
  to_float_kernel<<<unsigned((C + kThreads - 1) / kThreads), kThreads, 0, ctx.stream()>>>(sums, C, dbias);
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "to_float_kernel");
}

void bias_gradient(CudaContext& ctx, const void* dy, cudnnDataType_t dy_type, long long rows, int C, float* dbias) {
  activation_gradient(ctx, Activation{}, nullptr, dy, dy_type, rows, C, nullptr, CUDNN_DATA_FLOAT, dbias);
}

}  // namespace trainer::cuda
