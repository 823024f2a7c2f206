#pragma once
// A trained model from a checkpoint: its stored config, rebuilt and holding
// the checkpoint's weights, ready to predict or evaluate.
#include <memory>
#include <string>

#include "config/config.h"
#include "train/trainer.h"

namespace trainer {

/// The checkpoint's stored config and a Trainer built from it (the Trainer
/// refers to *config, so both live together).
struct LoadedModel {
  std::unique_ptr<Config> config;
  std::unique_ptr<Trainer> trainer;
};

/// Loads checkpoint_path (io/checkpoint.h), parses its stored config, builds
/// a Trainer with the towers of plan (threads_per_tower OpenMP threads each
/// for CPU towers; GPU towers in the stored config's precision)
/// and copies the weights into every tower. Throws UserError naming
/// checkpoint_path for a missing, truncated, corrupt or foreign checkpoint, a
/// stored config that does not parse, or weights of another model.
LoadedModel load_model(const std::string& checkpoint_path, const DevicePlan& plan, int threads_per_tower);

}  // namespace trainer
