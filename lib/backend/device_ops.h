#pragma once
// The per-device implementations behind the backend interface (ops.h,
// elementwise_ops.h, train_ops.h): namespace cpu (backend/cpu/, always built)
// and namespace cuda (backend/cuda/, built when TRAINER_WITH_CUDA). Both
// declare every function of the op lists (backend/elementwise_ops.inc,
// backend/train_ops.inc) with the public signature and contract, and the
// factories of the op classes' per-device implementations; the dispatch
// (backend/op_list_dispatch.cpp and ops_dispatch.cpp) calls one or the other by
// the device's kind. Internal to lib/backend.
#include <memory>

#include "backend/elementwise_ops.h"
#include "backend/ops.h"
#include "backend/train_ops.h"

#define TRAINER_OP(ret, name, params, args) ret name params;
#define TRAINER_DEVICE_OPS                                                             \
  std::unique_ptr<ConvBackend> make_conv2d(const Device& d, Conv2DParams p);           \
  std::unique_ptr<ConvBackend> make_conv2d_transpose(const Device& d, Conv2DParams p); \
  std::unique_ptr<PoolBackend> make_max_pool2d(const Device& d, Pool2DParams p);       \
  std::unique_ptr<BatchNormBackend> make_batch_norm(const Device& d);

namespace trainer {
namespace cpu {
TRAINER_DEVICE_OPS
#include "backend/elementwise_ops.inc"
#include "backend/train_ops.inc"
}  // namespace cpu
#if defined(TRAINER_WITH_CUDA)
namespace cuda {
TRAINER_DEVICE_OPS
#include "backend/elementwise_ops.inc"
#include "backend/train_ops.inc"
}  // namespace cuda
#endif
}  // namespace trainer

#undef TRAINER_DEVICE_OPS
#undef TRAINER_OP
