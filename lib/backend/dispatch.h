#pragma once
// TRAINER_DISPATCH(d, call): `return cpu::call` or, for a CUDA device d,
// `return cuda::call` (backend/device_ops.h). Without the CUDA backend a CUDA
// device raises InternalError. Internal to the dispatch files of lib/backend.
#include "backend/device_ops.h"
#include "core/error.h"

namespace trainer::detail {

/// d when it is the CPU; InternalError "... built without CUDA" otherwise.
inline const Device& require_cpu(const Device& d) {
  if (d.is_cuda())
    throw InternalError("device " + d.str() + " requested, but trainer was built without the CUDA backend "
                        "(TRAINER_CUDA=OFF)");
  return d;
}

}  // namespace trainer::detail

#if defined(TRAINER_WITH_CUDA)
#define TRAINER_DISPATCH(d, call) return (d).is_cuda() ? cuda::call : cpu::call
#else
#define TRAINER_DISPATCH(d, call) return ((void)::trainer::detail::require_cpu(d), cpu::call)
#endif
