#pragma once
// model.compile's arguments (a .keras file's compile_config, an .h5 model's
// training_config) as the loss, optimizer and metrics of a training section.
#include <string>
#include <vector>

#include "keras/keras_json.h"

namespace trainer {

/// The training keys from compile, each a whole "key: value" line of YAML.
struct CompileTranslation {
  std::vector<std::string> lines;     ///< e.g. "loss: binary_crossentropy", "optimizer: {type: Adam, learning_rate: 0.001}".
  std::vector<std::string> notes;     ///< What changed form, e.g. a custom mean_iou taken as trainer's.
  std::vector<std::string> problems;  ///< What trainer cannot take, each with its fix.
};

/// Translates compile (null: the model was not compiled; no lines then).
/// The optimizer keeps learning_rate and the arguments that differ from
/// Keras's defaults; a loss or metric object keeps its non-default
/// arguments; string names pass as they are (the config reader knows
/// Keras's names). Metrics: "accuracy", "acc", "binary_accuracy" ->
/// accuracy; Precision, Recall, BinaryIoU and AUC (with their defaults) keep
/// their names; MeanIoU -> MeanIoU (logged mean_io_u) with a categorical
/// loss, binary_iou (2 classes) with a binary one; a function of
/// the user's own named mean_iou -> mean_iou (the DSB 2018 kernels'
/// threshold-averaged IoU, with a note); any other function of the user's
/// own, for the loss or a metric, is a problem. Each line is then checked
/// by check_training_lines.
CompileTranslation translate_compile(const KerasJson& compile);

/// The problems the config reader finds in training lines (one message
/// per line that does not read), each naming the key.
std::vector<std::string> check_training_lines(const std::vector<std::string>& lines);

}  // namespace trainer
