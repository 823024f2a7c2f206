// The public functions of the op lists (backend/elementwise_ops.inc,
// backend/train_ops.inc): each calls the CPU or the CUDA implementation of the
// same signature by the device's kind.
#include "backend/dispatch.h"

namespace trainer {

#define TRAINER_OP(ret, name, params, args) \
  ret name params {                         \
    TRAINER_DISPATCH(d, name args);         \
  }
#include "backend/elementwise_ops.inc"
#include "backend/train_ops.inc"
#undef TRAINER_OP

}  // namespace trainer
