#pragma once
// The info lines a training run starts with: what trains on what, and every
// setting a user may not expect to be on (frozen layers, a schedule,
// regularizers, class weights, clipping, augmentation).
#include <cstddef>

#include "config/config.h"

namespace trainer {

class Trainer;

/// Logs (spdlog info; a warning for a batch smaller than the towers, or a
/// focal alpha that weighs nothing) the run's samples, batch and towers, and
/// the settings above. trainer: the run's (its config() holds the batch and
/// learning rate resolved for the towers).
void announce_run(const Config& config, const Trainer& trainer, size_t train_samples, size_t val_samples);

}  // namespace trainer
