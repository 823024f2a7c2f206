// The binary focal cross-entropy's sum and gradient (and the binary
// cross-entropy's with label smoothing) on a GPU, on the tower's compute
// stream, per value through backend/train_math.h; the sum is deterministic
// (fixed_partition_sum.cuh).
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/fixed_partition_sum.cuh"
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cuda {

namespace {

/// One value's sigmoid_focal_loss (fixed_partition_sum's term).
struct SigmoidFocalTerm {
  const float* z;
  const float* y;
  CrossEntropyForm f;
  __device__ float operator()(size_t i) const { return trainer::sigmoid_focal_loss(z[i], y[i], f); }
};

/// scale * sigmoid_focal_grad on every value.
struct SigmoidFocalGrad {
  const float* z;
  const float* y;
  CrossEntropyForm f;
  float scale;
  float* g;
  template <class I>
  __device__ void one(I i) const {
    g[i] = scale * trainer::sigmoid_focal_grad(z[i], y[i], f);
  }
  template <class I>
  __device__ void quad(I j) const {
    const float4 a = load4(z, j), b = load4(y, j);
    float4 d;
    d.x = scale * trainer::sigmoid_focal_grad(a.x, b.x, f), d.y = scale * trainer::sigmoid_focal_grad(a.y, b.y, f);
    d.z = scale * trainer::sigmoid_focal_grad(a.z, b.z, f), d.w = scale * trainer::sigmoid_focal_grad(a.w, b.w, f);
    store4(g, j, d);
  }
};

}  // namespace

void sigmoid_focal_sum(const Device& d, const float* z, const float* y, size_t n, CrossEntropyForm f,
                       double* sum_host) {
  fixed_partition_sum(context(d), SigmoidFocalTerm{z, y, f}, n, sum_host, "sigmoid_focal_sum launch");
}

void sigmoid_focal_grad(const Device& d, const float* z, const float* y, size_t n, CrossEntropyForm f, float scale,
                        float* g) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), SigmoidFocalGrad{z, y, f, scale, g}, n, aligned16(z, y, g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "sigmoid_focal_grad");
}

}  // namespace trainer::cuda
