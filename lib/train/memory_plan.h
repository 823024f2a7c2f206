#pragma once
// The device memory one GPU tower holds in a training step, planned on the
// CPU from the model's shapes and types and the optimizer (no GPU needed):
// what `trainer summary --batch-size B --precision P` prints and what the
// out-of-memory message of a GPU tower quotes. docs/gpu.md says what each
// part is and what the plan leaves out.
#include <cstddef>
#include <string>

#include "config/config.h"
#include "nn/model.h"

namespace trainer {

/// Bytes of each part of a GPU tower's memory in a training step.
struct DeviceMemoryPlan {
  int batch = 0;                  ///< Samples on the tower.
  Precision precision = Precision::TF32;
  size_t weights = 0;             ///< Trainable parameters and non-trainable state, fp32.
  size_t gradients = 0;           ///< The parameters' gradients, fp32 (all-reduced in place).
  size_t optimizer = 0;           ///< The optimizer's slots (momentum, Adam's m and v, ...), fp32.
  size_t batch_buffers = 0;       ///< The masks [N, H, W, 1] and the upload's staging copy of images and masks, fp32.
  /// The layers' outputs (the input batch included) and their gradients, as
  /// many as a step holds at once: Model::planned_activation_bytes (steady).
  size_t activations = 0;
  size_t layer_kept = 0;          ///< What layers keep from forward to backward (Model::layer_memory).
  size_t layer_transient = 0;     ///< The largest one layer holds during its backward.
  size_t workspace = 0;           ///< The largest workspace request of one call, cuDNN's algorithm workspace left out.
  size_t total() const {
    return weights + gradients + optimizer + batch_buffers + activations + layer_kept + layer_transient + workspace;
  }
};

/// The plan for `model` (built from the config, on the CPU; its activation
/// types are set here for `precision`) with `batch` samples on the tower
/// and `optimizer`'s slots; the model's output activation is removed, as
/// a training tower removes it (Model::use_logits_output). UserError for a
/// batch below 1.
DeviceMemoryPlan plan_device_memory(Model& model, int batch, Precision precision, const OptimizerConfig& optimizer);

/// One sentence for a GPU tower's out-of-memory message: the plan's total
/// for `batch` samples of config's model in its training.precision, and the
/// command that lists its parts. Empty when the plan cannot be made.
std::string memory_plan_hint(const Config& config, int batch);

/// The plan as lines of text, a part a line with MiB and the total,
/// followed by what it leaves out.
std::string memory_plan_text(const DeviceMemoryPlan& plan);

}  // namespace trainer
