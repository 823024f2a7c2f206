// Keras's clipvalue and clipnorm / global_clipnorm on a GPU, on the tower's
// compute stream, per element through backend/train_math.h. Clipping by norm
// reads nothing back: the square sums stay on the device
// (queue_abs_and_square_sums) and every thread takes its span's factor from
// them, so the host never waits for the compute stream (which may be waiting
// for a gradient all-reduce) and a stuck collective stays within reach of the
// communicator's timeout.
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/partial_sums.h"
#include "backend/device_ops.h"
#include "backend/train_math.h"

namespace trainer::cuda {

namespace {

/// clipped_value on every element.
struct ClipByValue {
  float* g;
  float limit;
  template <class I>
  __device__ void one(I i) const {
    g[i] = clipped_value(g[i], limit);
  }
  template <class I>
  __device__ void quad(I j) const {
    float4 d = load4(g, j);
    d.x = clipped_value(d.x, limit), d.y = clipped_value(d.y, limit);
    d.z = clipped_value(d.z, limit), d.w = clipped_value(d.w, limit);
    store4(g, j, d);
  }
};

/// g[i] *= clip_norm_factor(*square_sum, limit, global); nothing is written where the factor is 1.
struct ScaleByNormFactor {
  float* g;
  const double* square_sum;  ///< Device memory.
  double limit;
  bool global;
  template <class I>
  __device__ void one(I i) const {
    const float f = clip_norm_factor(*square_sum, limit, global);
    if (f != 1.f) g[i] *= f;
  }
  template <class I>
  __device__ void quad(I j) const {
    const float f = clip_norm_factor(*square_sum, limit, global);
    if (f == 1.f) return;
    float4 d = load4(g, j);
    d.x *= f, d.y *= f, d.z *= f, d.w *= f;
    store4(g, j, d);
  }
};

}  // namespace

void clip_by_norm(const Device& d, float* const* gs, const size_t* ns, size_t k, double limit, bool global) {
  if (k == 0) return;
  CudaContext& ctx = context(d);
  const double* sums = queue_abs_and_square_sums(ctx, gs, ns, k);
  for (size_t j = 0; j < k; ++j) {
    if (ns[j] == 0) continue;
    launch_elementwise(ctx.stream(), ScaleByNormFactor{gs[j], sums + 2 * j + 1, limit, global}, ns[j],
                       aligned16(gs[j]));
    TRAINER_CUDA_CHECK_LAUNCH(ctx, "clip_by_norm");
  }
}

void clip_by_value(const Device& d, float* g, size_t n, float limit) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), ClipByValue{g, limit}, n, aligned16(g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "clip_by_value");
}

}  // namespace trainer::cuda
