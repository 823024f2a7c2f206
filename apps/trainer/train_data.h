#pragma once
// The training command's data: the options of its image/mask folders (and
// validation folders) for the model, and their pairs loaded or streamed.
#include "config/config.h"
#include "data/dataset.h"
#include "dist/process_group.h"
#include "nn/model.h"
#include "world_data.h"

namespace trainer::cli {

/// The run's data. One process holds every pair decoded (data, validation);
/// several decode per step only their towers' samples (stream,
/// validation_stream), and data and validation then hold the names alone.
struct TrainData {
  DataOptions train, validation_options;  ///< data.images/masks; data.validation_images/masks.
  bool has_validation = false;            ///< data.validation_images is given.
  Dataset data, validation;
  WorldPairs stream, validation_stream;
};

/// The options of config's folders for model's input [H, W, C], with the
/// loss's ignore_class; folders_from_flags: --images or --masks gave them
/// (messages name the flags, else the config). Nothing is read.
TrainData data_options(const Config& config, const Model& model, bool folders_from_flags);

/// UserError naming the folder when the images and masks of d's folders do
/// not pair up (find_image_pairs: names only, nothing is decoded).
void check_pairs_match(const TrainData& d);

/// Loads d's pairs for a model of `classes` output classes (0: binary):
/// decoded (load_dataset) by a process alone, else streamed
/// (open_world_pairs, a collective). Warns of classes no training mask holds
/// and of validation folders that are the training folders. UserError from
/// the loading, naming the file.
void load_training_data(TrainData& d, int classes, ProcessGroup* world);

}  // namespace trainer::cli
