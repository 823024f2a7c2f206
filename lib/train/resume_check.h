#pragma once
// What changed between the run a checkpoint was saved from and the config a
// user resumes it with. Continuing with other settings is allowed (e.g. a
// lower learning rate to fine-tune), but the run is then no longer the one
// that was stopped, so each difference is reported.
#include <string>
#include <vector>

#include "config/config.h"

namespace trainer {

class Model;

/// Compares now (the config given with --resume) with then (the one stored in
/// the checkpoint at source). Throws UserError naming source when the
/// optimizer type, amsgrad, centered, or whether SGD's or RMSprop's momentum is
/// above 0 differs (the state slots differ and cannot carry over). Returns one line per
/// other difference among the optimizer's settings, loss, batch_size, seed,
/// validation_split, shuffle, the data folders and each layer's keys (layers
/// of the same name at the same place, after the Input), e.g.
/// "training.optimizer.learning_rate is 0.1 (the checkpoint's run used 0.001)".
/// Whether the weights fit is checked separately (Trainer::load_weights).
std::vector<std::string> resume_differences(const Config& now, const Config& then, const std::string& source);

/// Throws UserError naming source and every layer of model (the resuming
/// config's) with trainable weights that then (the checkpoint's stored config)
/// trained with another trainable: the gradient buffer and the optimizer's
/// state hold the trainable weights only, so they cannot carry over. Returns,
/// as resume_differences, a line for a layer whose weights are all state
/// (BatchNormalization without gamma and beta: freezing it only stops its
/// moving statistics). trainable on a layer without weights changes nothing
/// and is not compared.
std::vector<std::string> check_resume_trainable(const Config& then, const Model& model, const std::string& source);

}  // namespace trainer
