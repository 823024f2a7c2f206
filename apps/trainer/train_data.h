#pragma once
// The training command's data: the options of its image/mask folders (and
// validation folders) for the model, and their pairs loaded or streamed.
#include "config/config.h"
#include "data/dataset.h"
#include "dist/process_group.h"
#include "nn/model.h"
#include "train/trainer.h"
#include "world_data.h"

namespace trainer::cli {

/// The run's data. One process holds every pair decoded (data, validation);
/// several decode per step only their towers' samples (stream,
/// validation_stream), and data and validation then hold the names alone.
struct TrainData {
  DataOptions train, validation_options;  ///< data.images/masks; data.validation_images/masks.
  bool has_validation = false;            ///< data.validation_images is given.
  Dataset data, validation;
  /// A process alone: the pairs require_memory_for_data found, which load_training_data loads.
  std::vector<ImagePair> pairs, validation_pairs;
  WorldPairs stream, validation_stream;
};

/// The options of config's folders for model's input [H, W, C], with the
/// loss's ignore_class; folders_from_flags: --images or --masks gave them
/// (messages name the flags, else the config). Nothing is read.
TrainData data_options(const Config& config, const Model& model, bool folders_from_flags);

/// UserError naming the folder when the images and masks of d's folders do
/// not pair up (find_image_pairs: names only, nothing is decoded).
void check_pairs_match(const TrainData& d);

/// Before anything is decoded, with a cgroup memory limit (core/memory_limit.h):
/// refuses (require_host_memory) a run whose data, held by a process alone,
/// and what one step of its CPU towers holds of layer outputs and their
/// gradients (Trainer::host_activation_bytes) need more than the limit
/// leaves. A process alone finds d's pairs for that (kept in d for
/// load_training_data); one of several plans the batch alone (it holds two
/// steps' samples). Nothing is read without a limit. UserError as
/// find_image_pairs, or naming the sizes.
void require_memory_for_data(TrainData& d, const Trainer& trainer, bool alone);

/// Loads d's pairs (those require_memory_for_data found; found here when it
/// did not run) for a model of `classes` output classes (0: binary):
/// decoded (load_dataset) by a process alone, else streamed
/// (open_world_pairs, a collective). Warns of classes no training mask holds
/// and of validation folders that are the training folders. UserError from
/// the loading, naming the file.
void load_training_data(TrainData& d, int classes, ProcessGroup* world);

}  // namespace trainer::cli
