#pragma once
// trainer import: a Keras model file as a trainer config (YAML) and, when the
// file holds weights, those weights as a checkpoint that
// training.initial_weights loads (docs/from_keras.md).
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "keras/keras_file.h"

namespace trainer {

struct ImportPaths {
  std::string source;   ///< The Keras file, as given (named in the config's comments).
  std::string config;   ///< Where the config will be written (named in messages of the config reader).
  std::string weights;  ///< Where the weights will be written; the config's initial_weights ("" : none written).
};

/// A Keras model as trainer files, or the reasons it cannot be one.
struct ImportedModel {
  std::string yaml;                    ///< The whole config text; "" when problems is not empty.
  std::vector<WeightRecord> weights;   ///< The file's weights by trainer's names and shapes (empty without).
  std::vector<std::string> notes;      ///< What changed form on the way (a Lambda as Rescaling, ...).
  std::vector<std::string> problems;   ///< Everything trainer cannot take, each with its layer and fix.
};

/// Translates file: its layers (translate_layer, check_layer_keys), its
/// compile arguments (translate_compile), then the whole config as the
/// config reader and the model builder see it (shapes that do not fit), and
/// the weights, matched to the model's by layer name and then by Keras's
/// names (.h5) or order (.keras), each of the model's shape. All problems
/// are gathered, not only the first. Does not write files; throws only
/// InternalError.
ImportedModel import_keras_model(const KerasModelFile& file, const ImportPaths& paths);

}  // namespace trainer
