#pragma once
// Readers of the config file's sections, used by parse_config() (config.cpp).
// Each takes the section's YAML node, reads it through a ParamReader (so every
// error is "<file>:<line>:<col>: ..."), rejects unknown keys and returns the
// typed struct of config.h. All throw UserError.
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config/params.h"

namespace trainer {

/// model: {name, layers: [...]}. Checks that the first layer (only) is an
/// Input, each layer's name (unique; default as keras_default_name) and inputs (earlier
/// layers only); the layers' own keys are left to their factories.
ModelConfig read_model_section(const YAML::Node& node, const std::string& file);
/// data: {images, masks, mask_suffix, validation_split, validation_images,
/// validation_masks, shuffle, skip_bad_files, loader_threads, augmentation}.
DataConfig read_data_section(const YAML::Node& node, const std::string& file);
/// data.augmentation's random affine transform and brightness, in Keras's
/// ImageDataGenerator names: rotation_range (degrees, [0, 360]),
/// width_shift_range and height_shift_range (>= 0), shear_range (degrees, [0,
/// 89]), zoom_range (z in [0, 1) or [low, high]), fill_mode (constant,
/// nearest, reflect, wrap), cval, brightness_range ([low, high]).
void read_affine_augmentation(ParamReader& p, AugmentationConfig& a);
/// training.callbacks (node: the list) into t: one reader per callback type
/// (config/callbacks/); t.metrics must be read already (monitors name them).
void read_callbacks(const YAML::Node& node, const std::string& file, TrainingConfig& t, bool has_validation);
/// Fails, before 'type' is read, for a mapping (head) that names its class
/// in 'name' instead, as Keras's get_config() does ({name: adam, ...});
/// example: a class for the fix, e.g. "Adam".
void require_type(ParamReader& head, const std::string& example);
/// The names of MonitorMode, FillMode and LearningRateScaling, in each
/// enum's order (choices.cpp).
const std::vector<std::string>& monitor_mode_names();
const std::vector<std::string>& fill_mode_names();
const std::vector<std::string>& scaling_names();
/// The index of value in names, which the reader has checked it is one of
/// (InternalError otherwise).
size_t choice_index(const std::string& value, const std::vector<std::string>& names);
/// The metrics training.metrics may name, under Keras's log keys (MeanIoU is
/// mean_io_u, AUC auc, ...).
const std::vector<std::string>& metric_names();
/// training: {epochs, batch_size, seed, loss, metrics, optimizer, callbacks,
/// output_dir}. has_validation: DataConfig::has_validation() (val_* monitors need it).
TrainingConfig read_training_section(const YAML::Node& node, const std::string& file,
                                     bool has_validation);

/// training.loss: a name (a loss function, loss_name of a LossKind, or its
/// Keras class: BinaryCrossentropy, BinaryFocalCrossentropy,
/// SparseCategoricalCrossentropy, CategoricalCrossentropy,
/// CategoricalFocalCrossentropy, Dice, Tversky), or a mapping {type,
/// from_logits, ignore_class (sparse only, 0..65535), reduction (the default
/// only), label_smoothing, gamma, alpha, apply_class_balancing, beta, axis
/// (-1; Dice and Tversky: null or [1, 2, 3]), name (ignored)} with Keras's
/// argument names, each where that class takes it (docs/config.md).
/// training (the section's reader) gives the key 'loss'; absent: the default.
LossConfig read_loss(ParamReader& training);

/// Keras's to_snake_case of a class name: "Conv2DTranspose" -> "conv2d_transpose",
/// "MaxPooling2D" -> "max_pooling2d", "BatchNormalization" -> "batch_normalization".
std::string keras_snake_case(const std::string& type);

}  // namespace trainer
