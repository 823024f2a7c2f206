// Keras's clipvalue on a GPU, on the tower's compute stream, per element
// through backend/train_math.h.
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/elementwise_kernel.cuh"
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

}  // namespace

void clip_by_value(const Device& d, float* g, size_t n, float limit) {
  if (n == 0) return;
  CudaContext& ctx = context(d);
  launch_elementwise(ctx.stream(), ClipByValue{g, limit}, n, aligned16(g));
  TRAINER_CUDA_CHECK_LAUNCH(ctx, "clip_by_value");
}

}  // namespace trainer::cuda
