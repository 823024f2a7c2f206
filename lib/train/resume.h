#pragma once
// Resuming a run from its checkpoint (--resume): the weights and optimizer
// state go into the trainer, after the config it resumes with is compared to
// the one that trained the checkpoint (resume_check.h).
#include <optional>
#include <string>

#include "config/config.h"
#include "io/checkpoint.h"
#include "train/fit.h"
#include "train/trainer.h"

namespace trainer {

/// Gives trainer the checkpoint's weights and optimizer state (ckpt, read
/// from path), warning of each way config differs from the config its run
/// used (resume_differences), and sets run_folder to the checkpoint's run
/// folder (run_folder_of, from that run's ModelCheckpoint filepath).
/// Returns the run's result (after a warning saying how to train further)
/// when nothing is left to train: the checkpoint has trained config's epochs,
/// or EarlyStopping ended its run and config's would end it again at once.
/// UserError naming path when it holds no optimizer state (a weights-only
/// file), its weights are not the model's, or a setting cannot carry over
/// (check_resume_trainable, resume_differences).
std::optional<FitResult> load_resume(const Checkpoint& ckpt, const std::string& path, const Config& config,
                                     Trainer& trainer, std::string& run_folder);

}  // namespace trainer
