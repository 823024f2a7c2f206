#pragma once
// export --format keras: a trained model as a Keras 3 `.keras` file
// (keras.io/guides/serialization_and_saving: a zip of config.json, the
// Functional model's config; model.weights.h5, each layer's variables as
// /layers/<name>/vars/<i>; metadata.json) that keras.models.load_model opens.
#include <string>
#include <vector>

#include "config/config.h"
#include "io/checkpoint.h"
#include "keras/keras_json.h"
#include "nn/model.h"
#include "nn/output_activation.h"

namespace trainer {

/// Keras's config of a Functional model of config's layers (built as
/// model): each layer's Keras class, name and the arguments its config
/// entry gives (Keras fills in its defaults, which are trainer's), the
/// Input as an InputLayer of batch_shape [None, H, W, C], and the calls
/// between them. With append other than None, an Activation layer
/// ("probability": sigmoid or softmax) ends the model, for a model trained
/// from logits. Throws InternalError for a config that does not match model.
KerasJson keras_model_config(const ModelConfig& config, const Model& model, OutputActivation append);

/// The bytes of a .keras file of config with weights (a checkpoint's, in
/// the model's order and Keras's layouts). Throws InternalError when a
/// weight is missing or HDF5 or the zip cannot be written in memory.
std::string keras_file_bytes(const ModelConfig& config, const Model& model, const std::vector<WeightRecord>& weights,
                             OutputActivation append);

}  // namespace trainer
