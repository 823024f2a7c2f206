#pragma once
// Non-owning views of a tensor for the backend ops: the device pointer (host
// pointer for the CPU), the element type, the NHWC shape ([N, H, W, C]) and
// the layout in memory (row-major unless Layout says otherwise) travel
// together, so an op's signature names each tensor once.
// A view is valid while the tensor it was taken from keeps its storage.
#include "core/dtype.h"
#include "core/shape.h"

namespace trainer {

/// How an activation's [N, H, W, C] elements lie in memory.
enum class Layout {
  NHWC,  ///< Row-major [N, H, W, C]: every tensor but the ones below.
  /// [N, C / 16, H, W, 16] (oneDNN's nChw16c), C a multiple of 16: the
  /// output of a CPU convolution whose only consumer is another one that
  /// reads it so (Winograd), and its gradient (Model::set_activation_layouts).
  Blocked16,
};

/// A tensor an op reads.
struct ConstTensorView {
  const void* data = nullptr;
  DType dtype = DType::F32;
  Shape shape;
  Layout layout = Layout::NHWC;
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
  Layout layout = Layout::NHWC;
  operator ConstTensorView() const { return {data, dtype, shape, layout}; }
  /// data as fp32 elements; InternalError (naming `what`) for bf16.
  float* f32(const char* what) const {
    require_f32(dtype, what);
    return static_cast<float*>(data);
  }
};

}  // namespace trainer
