#pragma once
// Keras model files as users save them, read into their JSON config and
// weights: a Keras 3 `.keras` file (a zip of config.json, model.weights.h5 and
// metadata.json: keras.io/guides/serialization_and_saving), a legacy `.h5`
// model (model.save("m.h5") of Keras 2, tf.keras or Keras 3: the JSON
// attributes model_config and training_config and the /model_weights group)
// or the text of model.to_json().
#include <string>
#include <vector>

#include "io/hdf5_util.h"
#include "keras/keras_json.h"

namespace trainer {

/// How a Keras model file was saved.
enum class KerasFormat {
  Keras,     ///< Keras 3 .keras zip.
  LegacyH5,  ///< HDF5 model file.
  Json,      ///< model.to_json() text.
};

/// The name of a format in messages: ".keras file", "legacy .h5 model", "model.to_json() file".
const char* keras_format_name(KerasFormat format);

/// One layer's weights as the file stores them, in the layer's variable
/// order (Conv2D: kernel, bias; BatchNormalization: gamma, beta,
/// moving_mean, moving_variance), shapes in Keras's layout.
struct KerasLayerWeights {
  std::string layer;
  /// Keras's weight names ("kernel", "bias"; ":0" dropped) where the file
  /// stores them (.h5); empty for a .keras file, whose variables are numbered.
  std::vector<std::string> names;
  std::vector<h5::FloatArray> arrays;
};

struct KerasModelFile {
  KerasFormat format = KerasFormat::Json;
  /// The model: {"class_name": "Functional" | "Sequential" | "Model", "config": {...}}.
  KerasJson model;
  /// model.compile's arguments (.keras: compile_config; .h5: training_config,
  /// whose optimizer is optimizer_config); null when the model was not compiled.
  KerasJson compile;
  /// The layers' weights (layers without weights left out); empty for JSON.
  std::vector<KerasLayerWeights> weights;
  std::string keras_version;  ///< As stored ("3.15.1"); "" when absent.
};

/// Reads a Keras model file, telling the format from its first bytes (zip,
/// HDF5 or JSON text). Throws UserError naming path: missing or unreadable,
/// none of the three formats, a trainer checkpoint (there is nothing to
/// import), JSON that does not parse (with the parser's position), a .keras
/// zip without config.json, an .h5 without model_config (weights saved by
/// save_weights: no model in it), weights that cannot be read, and a file
/// on which libzip or libhdf5 crash, hang or exhaust memory: they parse in a
/// process of their own (core/isolated_call.h; limits in docs/checkpoint.md,
/// "Errors when loading").
KerasModelFile read_keras_file(const std::string& path);

/// Whether path is a .keras zip that trainer's export wrote (its
/// metadata.json names trainer_version); false for anything else, never throws.
bool written_by_trainer_export(const std::string& path);

/// KerasModelFile's model and compile parts from JSON text (to_json() or a
/// .keras config.json); where names the source in messages. Throws UserError
/// for text that does not parse or is no Keras model config.
KerasModelFile parse_keras_json(const std::string& text, const std::string& where);

}  // namespace trainer
