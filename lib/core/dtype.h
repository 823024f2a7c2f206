#pragma once
// DType: how a tensor's elements are stored. Parameters, gradients of the
// weights, optimizer state, loss and metrics are always fp32; activations
// (layer outputs and their gradients) are fp32 except on a tower with
// training.precision bf16 (a GPU, or a CPU with AVX512-BF16 or AMX), where the
// model stores the tensors that flow between bf16-capable layers (Conv2D,
// Conv2DTranspose, MaxPooling2D, Concatenate, Cropping2D, ZeroPadding2D) as
// bfloat16, as PyTorch's autocast does (Model::set_activation_type, called by
// the trainer's towers).
#include <cstddef>

#include "core/error.h"

namespace trainer {

enum class DType {
  F32,   ///< IEEE binary32.
  BF16,  ///< bfloat16: the top 16 bits of a binary32 (8-bit exponent, 7-bit mantissa), rounded to nearest even.
  /// Unsigned 8- and 16-bit integers: decoded samples held on the host as
  /// their files store them (data/dataset.h, Dataset); no op takes them.
  U8,
  U16,
};

/// Bytes of one element: 4 (F32), 2 (BF16, U16) or 1 (U8).
constexpr size_t dtype_size(DType t) { return t == DType::F32 ? 4 : t == DType::U8 ? 1 : 2; }
/// "fp32" | "bf16" | "uint8" | "uint16".
constexpr const char* dtype_name(DType t) {
  return t == DType::F32 ? "fp32" : t == DType::BF16 ? "bf16" : t == DType::U8 ? "uint8" : "uint16";
}

/// Throws InternalError "<what> takes fp32 tensors, got <t>" unless t is F32
/// (for code paths that compute in fp32 only, such as most CPU ops).
inline void require_f32(DType t, const char* what) {
  if (t != DType::F32) throw InternalError(std::string(what) + " takes fp32 tensors, got " + dtype_name(t));
}

}  // namespace trainer
