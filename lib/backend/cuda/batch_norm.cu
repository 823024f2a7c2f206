// BatchNormOp's CUDA backend (cuda::make_batch_norm), on the tower's compute
// stream. Our own kernels rather than cuDNN's batch normalization: cuDNN
// computes the batch statistics inside one call and never exposes the
// per-channel sums, which synchronized BN must all-reduce across towers
// between the reduction and the coefficient steps (elementwise_ops.h).
//
// Reductions (stat_sums, grad_sums) are deterministic: the P = N*H*W pixels
// are cut into `parts` fixed ranges (a function of P and C only, not of the
// GPU), a block per (range, tile of up to 32 channels) adds its pixels in
// double in a fixed order and writes one partial per channel to a scratch
// area from the context's workspace (used within the call only), and
// sum_partials adds the partials of each channel in a fixed order. The
// coefficient steps are one-thread-per-channel kernels on device arrays with
// the CPU's formulas (backend/cpu/batch_norm.cpp) in double; the element-wise
// steps go through backend/elementwise_math.h (float4 accesses when C % 4 == 0
// and the arrays are 16-byte aligned).
#include <algorithm>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/partial_sums.h"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// Channels per block of the reduction (a warp reads 32 consecutive channels of a pixel).
constexpr int kTileChannels = 32;
/// Pixels per range below which the reduction uses fewer ranges.
constexpr long long kPixelsPerPart = 256;
/// Blocks the reduction aims at (ranges x channel tiles), enough to fill an H200.
constexpr long long kReductionBlocks = 2048;

/// std::max's result for doubles ((a < b) ? b : a; a NaN a is kept), as the CPU computes.
__device__ inline double std_max(double a, double b) { return (a < b) ? b : a; }

/// Terms of stat_sums: x and x^2 of each element.
struct StatTerms {
  const float* x;
  struct Channel {
    const float* x;
    __device__ void add(size_t i, double& s1, double& s2) const {
      const double v = x[i];
      s1 += v;
      s2 += v * v;
    }
  };
  __device__ Channel channel(int) const { return {x}; }
};

/// Terms of grad_sums: dy and dy * xhat of each element of channel c.
struct GradTerms {
  const float* x;
  const float* dy;
  const float* mean;
  const float* istd;
  struct Channel {
    const float* x;
    const float* dy;
    float mean, istd;
    __device__ void add(size_t i, double& s1, double& s2) const {
      const float g = dy[i];
      s1 += g;
      s2 += double(g) * bn_xhat(x[i], mean, istd);
    }
  };
  __device__ Channel channel(int c) const { return {x, dy, mean[c], istd[c]}; }
};

/// Block (b, tile): partials[c * parts + b] and partials[(C + c) * parts + b]
/// <- the two sums of terms over pixels [P b / parts, P (b + 1) / parts) for
/// the channels c of the tile. Thread t handles channel tile * ct + t % ct and
/// every lanes-th pixel from t / ct (lanes = blockDim.x / ct); the lanes'
/// sums are then added in lane order.
template <class Terms>
__global__ void channel_partials_kernel(Terms terms, long long P, int C, int parts, int ct, double* partials) {
  __shared__ double sh1[kThreads], sh2[kThreads];
  const int tx = int(threadIdx.x) % ct, ty = int(threadIdx.x) / ct, lanes = int(blockDim.x) / ct;
  const int c = int(blockIdx.y) * ct + tx;
  const int b = int(blockIdx.x);
  double s1 = 0.0, s2 = 0.0;
  if (c < C) {
    const auto ch = terms.channel(c);
    const long long end = P * (b + 1) / parts;
    for (long long p = P * b / parts + ty; p < end; p += lanes) ch.add(size_t(p) * C + c, s1, s2);
  }
  sh1[threadIdx.x] = s1;
  sh2[threadIdx.x] = s2;
  __syncthreads();
  if (ty == 0 && c < C) {
    double a1 = 0.0, a2 = 0.0;
    for (int l = 0; l < lanes; ++l) {
      a1 += sh1[l * ct + tx];
      a2 += sh2[l * ct + tx];
    }
    partials[size_t(c) * parts + b] = a1;
    partials[size_t(C + c) * parts + b] = a2;
  }
}

/// Channel c's mean and istd, then a and b from them.
__device__ void set_coefficients(const BatchNormChannels& v, int c, float mean_c, float istd_c) {
  v.mean[c] = mean_c;
  v.istd[c] = istd_c;
  const float a_c = (v.gamma ? v.gamma[c] : 1.f) * istd_c;
  v.a[c] = a_c;
  v.b[c] = (v.beta ? v.beta[c] : 0.f) - mean_c * a_c;
}

/// See BatchNormBackend::train_coefficients (the CPU's formulas, one thread per channel).
__global__ void train_coefficients_kernel(const double* sums, double count, BatchNormSettings o,
                                          BatchNormChannels v) {
  const int c = int(blockIdx.x * blockDim.x + threadIdx.x), C = v.C;
  if (c >= C) return;
  const double unbias = count / std_max(count - 1.0, 1.0), mom = o.momentum;
  const double m = sums[c] / count;
  const double var = std_max(sums[C + c] / count - m * m, 0.0);
  v.moving_mean[c] = float(v.moving_mean[c] * mom + m * (1.0 - mom));
  v.moving_var[c] = float(v.moving_var[c] * mom + var * unbias * (1.0 - mom));
  set_coefficients(v, c, float(m), float(1.0 / sqrt(var + o.epsilon)));
}

/// See BatchNormBackend::inference_coefficients.
__global__ void inference_coefficients_kernel(double epsilon, BatchNormChannels v) {
  const int c = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= v.C) return;
  set_coefficients(v, c, v.moving_mean[c], float(1.0 / sqrt(double(v.moving_var[c]) + epsilon)));
}

/// See BatchNormBackend::param_grads.
__global__ void param_grads_kernel(const double* sums, int C, float* dgamma, float* dbeta) {
  const int c = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= C) return;
  if (dbeta) dbeta[c] = float(sums[c]);
  if (dgamma) dgamma[c] = float(sums[C + c]);
}

/// See BatchNormBackend::backward_coefficients (sums is not read without batch_stats).
__global__ void backward_coefficients_kernel(const double* sums, double count, bool batch_stats,
                                             BatchNormChannels v) {
  const int c = int(blockIdx.x * blockDim.x + threadIdx.x), C = v.C;
  if (c >= C) return;
  v.k1[c] = (v.gamma ? v.gamma[c] : 1.f) * v.istd[c];
  v.k2[c] = batch_stats ? float(sums[c] / count) : 0.f;
  v.k3[c] = batch_stats ? float(sums[C + c] / count) : 0.f;
}

/// y[i] <- bn_apply(x[i], a[c], b[c]), c = i % C (quad(): C % 4 == 0).
struct Apply {
  const float* x;
  const float* a;
  const float* b;
  float* y;
  int C;
  template <class I>
  __device__ void one(I i) const {
    const I c = i % I(C);
    y[i] = bn_apply(x[i], a[c], b[c]);
  }
  template <class I>
  __device__ void quad(I j) const {
    const I c4 = j % I(C / 4);
    const float4 v = load4(x, j), av = load4(a, c4), bv = load4(b, c4);
    store4(y, j,
           make_float4(bn_apply(v.x, av.x, bv.x), bn_apply(v.y, av.y, bv.y), bn_apply(v.z, av.z, bv.z),
                       bn_apply(v.w, av.w, bv.w)));
  }
};

/// dx[i] <- bn_backward(dy[i], x[i], mean[c], istd[c], k1[c], k2[c], k3[c]), c = i % C (quad(): C % 4 == 0).
struct BackwardData {
  const float* x;
  const float* dy;
  const float* mean;
  const float* istd;
  const float* k1;
  const float* k2;
  const float* k3;
  float* dx;
  int C;
  template <class I>
  __device__ void one(I i) const {
    const I c = i % I(C);
    dx[i] = bn_backward(dy[i], x[i], mean[c], istd[c], k1[c], k2[c], k3[c]);
  }
  template <class I>
  __device__ void quad(I j) const {
    const I c4 = j % I(C / 4);
    const float4 g = load4(dy, j), v = load4(x, j), m = load4(mean, c4), s = load4(istd, c4);
    const float4 p = load4(k1, c4), q = load4(k2, c4), r = load4(k3, c4);
    store4(dx, j,
           make_float4(bn_backward(g.x, v.x, m.x, s.x, p.x, q.x, r.x), bn_backward(g.y, v.y, m.y, s.y, p.y, q.y, r.y),
                       bn_backward(g.z, v.z, m.z, s.z, p.z, q.z, r.z),
                       bn_backward(g.w, v.w, m.w, s.w, p.w, q.w, r.w)));
  }
};

/// Blocks of kThreads for one thread per channel.
unsigned channel_blocks(int C) { return unsigned((C + kThreads - 1) / kThreads); }

class BatchNormCuda final : public BatchNormBackend {
 public:
  explicit BatchNormCuda(const Device& d) : ctx_(context(d)) {}

  void stat_sums(const float* x, Shape s, double* sums) override { channel_sums(StatTerms{x}, s, sums); }

  void train_coefficients(const double* sums, double count, BatchNormSettings o,
                          const BatchNormChannels& v) override {
    if (v.C <= 0) return;
    train_coefficients_kernel<<<channel_blocks(v.C), kThreads, 0, ctx_.stream()>>>(sums, count, o, v);
    TRAINER_CUDA_CHECK_LAUNCH(ctx_, "batch_norm train_coefficients");
  }

  void inference_coefficients(double epsilon, const BatchNormChannels& v) override {
    if (v.C <= 0) return;
    inference_coefficients_kernel<<<channel_blocks(v.C), kThreads, 0, ctx_.stream()>>>(epsilon, v);
    TRAINER_CUDA_CHECK_LAUNCH(ctx_, "batch_norm inference_coefficients");
  }

  void apply(const float* x, Shape s, const float* a, const float* b, float* y) override {
    const size_t n = s.numel();
    if (n == 0) return;
    const bool vec = s.c % 4 == 0 && aligned16(x, a, b, y);
    launch_elementwise(ctx_.stream(), Apply{x, a, b, y, s.c}, n, vec);
    TRAINER_CUDA_CHECK_LAUNCH(ctx_, "batch_norm apply");
  }

  void grad_sums(const float* x, const float* dy, Shape s, const BatchNormChannels& v, double* sums) override {
    channel_sums(GradTerms{x, dy, v.mean, v.istd}, s, sums);
  }

  void param_grads(const double* sums, int C, float* dgamma, float* dbeta) override {
    if (C <= 0 || (!dgamma && !dbeta)) return;
    param_grads_kernel<<<channel_blocks(C), kThreads, 0, ctx_.stream()>>>(sums, C, dgamma, dbeta);
    TRAINER_CUDA_CHECK_LAUNCH(ctx_, "batch_norm param_grads");
  }

  void backward_coefficients(const double* sums, double count, bool batch_stats,
                             const BatchNormChannels& v) override {
    if (v.C <= 0) return;
    backward_coefficients_kernel<<<channel_blocks(v.C), kThreads, 0, ctx_.stream()>>>(sums, count, batch_stats, v);
    TRAINER_CUDA_CHECK_LAUNCH(ctx_, "batch_norm backward_coefficients");
  }

  void backward_data(const float* x, const float* dy, Shape s, const BatchNormChannels& v, float* dx) override {
    const float *mean = v.mean, *istd = v.istd, *k1 = v.k1, *k2 = v.k2, *k3 = v.k3;
    const size_t n = s.numel();
    if (n == 0) return;
    const bool vec = s.c % 4 == 0 && aligned16(x, dy, mean, istd, k1, k2, k3, dx);
    launch_elementwise(ctx_.stream(), BackwardData{x, dy, mean, istd, k1, k2, k3, dx, s.c}, n, vec);
    TRAINER_CUDA_CHECK_LAUNCH(ctx_, "batch_norm backward_data");
  }

 private:
  /// sums[c] / sums[C + c] <- the two per-channel sums of terms over the
  /// N*H*W pixels of s (zeros when there are no pixels).
  template <class Terms>
  void channel_sums(const Terms& terms, Shape s, double* sums) {
    const int C = s.c;
    if (C <= 0) return;
    const long long P = (long long)s.n * s.h * s.w;
    if (P <= 0) {
      TRAINER_CUDA_CHECK(ctx_, cudaMemsetAsync(sums, 0, size_t(2) * C * sizeof(double), ctx_.stream()));
      return;
    }
    const int ct = std::min(C, kTileChannels), lanes = int(kThreads) / ct;
    const int tiles = (C + ct - 1) / ct;
    const long long max_parts = std::max(1LL, kReductionBlocks / tiles);
    const int parts = int(std::clamp((P + kPixelsPerPart - 1) / kPixelsPerPart, 1LL, max_parts));
    double* partials =
        static_cast<double*>(ctx_.workspace(size_t(2) * C * size_t(parts) * sizeof(double)));
    channel_partials_kernel<<<dim3(unsigned(parts), unsigned(tiles)), unsigned(ct * lanes), 0, ctx_.stream()>>>(
        terms, P, C, parts, ct, partials);
    TRAINER_CUDA_CHECK_LAUNCH(ctx_, "batch_norm channel_partials");
    sum_partials(ctx_, partials, 2 * C, parts, sums);
  }

  CudaContext& ctx_;
};

}  // namespace

std::unique_ptr<BatchNormBackend> make_batch_norm(const Device& d) { return std::make_unique<BatchNormCuda>(d); }

}  // namespace trainer::cuda
