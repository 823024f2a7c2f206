#pragma once
// Non-owning views of a tensor for the backend ops: the device pointer (host
// pointer for the CPU), the element type and the NHWC shape ([N, H, W, C],
// row-major) travel together, so an op's signature names each tensor once.
// A view is valid while the tensor it was taken from keeps its storage.
#include "core/dtype.h"
#include "core/shape.h"

namespace trainer {

/// A tensor an op reads.
struct ConstTensorView {
  const void* data = nullptr;
  DType dtype = DType::F32;
  Shape shape;
  /// data as fp32 elements; InternalError (naming `what`) for bf16.
  const float* f32(const char* what) const {
    require_f32(dtype, what);
    return static_cast<const float*>(data);
  }
};

/// A tensor an op writes (and may read).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  Shape shape;
  operator ConstTensorView() const { return {data, dtype, shape}; }
  /// data as fp32 elements; InternalError (naming `what`) for bf16.
  float* f32(const char* what) const {
    require_f32(dtype, what);
    return static_cast<float*>(data);
  }
};

}  // namespace trainer
