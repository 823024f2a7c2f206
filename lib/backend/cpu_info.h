#pragma once
// What this process's CPU offers the CPU backend.
#include "core/device.h"

namespace trainer {

/// Whether oneDNN runs bf16 convolutions on this CPU in hardware: AVX512-BF16
/// or AMX (oneDNN's effective ISA, which ONEDNN_MAX_CPU_ISA may lower). Without
/// them oneDNN would emulate bf16, slower than fp32. Never throws.
bool cpu_has_bf16();

/// The precision CPU towers compute in for training.precision `wanted`: BF16
/// where wanted and cpu_has_bf16(), else FP32 (CPUs have no TF32).
Precision cpu_precision(Precision wanted);

}  // namespace trainer
