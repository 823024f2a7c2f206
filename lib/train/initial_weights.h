#pragma once
// training.initial_weights: a new run starts from a checkpoint's weights, as
// Keras's model.load_weights(filepath, skip_mismatch=...) before fit().
#include <string>
#include <vector>

#include "config/config.h"
#include "io/checkpoint.h"
#include "train/trainer.h"

namespace trainer {

/// Copies into every tower the weights of `weights` (a checkpoint's, Keras
/// layout) whose layer holds weights of the same names and shapes, layer by
/// layer: a layer missing there, with another number of weights there (a
/// bias more or less), or one of whose weights is missing or of another shape
/// there, keeps its current (initial) values, as Keras's skip_mismatch=True. Returns one line per layer kept, e.g. "out ('out/kernel'
/// is [1, 1, 8, 1] there, [1, 1, 8, 3] in the model)". Throws UserError
/// naming source when no layer with weights fits (another model altogether).
std::vector<std::string> load_matching_weights(Trainer& trainer, const std::vector<WeightRecord>& weights,
                                               const std::string& source);

/// Starts trainer from the checkpoint tc.initial_weights names: every weight
/// must fit (Trainer::load_weights) unless tc.initial_weights_skip_mismatch,
/// which keeps the layers that do not fit at their initializers' values
/// (load_matching_weights, each named in a warning). The optimizer is
/// untouched. Throws UserError prefixed with tc.initial_weights_where when
/// the file cannot be read, does not fit, or lies in tc.output_dir (where
/// the run writes its checkpoints over it: a pretrained model lost).
void load_initial_weights(const TrainingConfig& tc, Trainer& trainer);

}  // namespace trainer
