#pragma once
// What the readers of training.callbacks' entries share (config-internal):
// the entry being read and the helpers for the keys several callbacks take.
// Each callback's reader is in its own file here, as its runtime is in
// lib/train/callbacks/; callback_config.cpp dispatches on 'type'.
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config/params.h"

namespace trainer {

/// One entry of training.callbacks, being read.
struct CallbackInput {
  ParamReader& p;                           ///< The entry's mapping ('type' and 'verbose' consumed).
  std::string what;                         ///< Its place for messages: "training.callbacks[0] (EarlyStopping)".
  const std::vector<std::string>& metrics;  ///< training.metrics, which a monitor may name.
  bool has_validation;                      ///< val_* quantities exist (DataConfig::has_validation()).
};

/// 'monitor' (Keras's default val_loss): the loss or a metric of
/// training.metrics, val_ ones only with validation data. UserError naming
/// the key, the nearest name and the quantities that can be monitored.
std::string read_monitor(const CallbackInput& in);

/// 'mode' (auto, min or max; mode keeps its default when absent) and its
/// place for later messages (where).
void read_mode(const CallbackInput& in, MonitorMode& mode, std::string& where);

/// Marks a callback of `type` given (c.enabled); UserError at 'type' when
/// an earlier entry gave one already (at most one of each). Returns c.
template <class CallbackConfig>
CallbackConfig& only_one(const CallbackInput& in, CallbackConfig& c, const std::string& type) {
  if (c.enabled) in.p.fail("type", "is " + type + " again; give at most one " + type);
  c.enabled = true;
  return c;
}

/// UserError at key unless path (its value) names a place inside
/// training.output_dir: relative and without "..". example: valid values.
void require_inside_output_dir(ParamReader& p, const std::string& key, const std::string& path,
                               const std::string& example);

/// keras.callbacks.EarlyStopping's arguments into t.early_stopping.
void read_early_stopping(const CallbackInput& in, TrainingConfig& t);
/// keras.callbacks.ReduceLROnPlateau's arguments into t.reduce_lr; UserError
/// when the learning rate is a schedule (Keras refuses this too).
void read_reduce_lr_on_plateau(const CallbackInput& in, TrainingConfig& t);
/// keras.callbacks.ModelCheckpoint's arguments into t.model_checkpoint:
/// an HDF5 filepath inside the output folder, saved every epoch.
void read_model_checkpoint(const CallbackInput& in, TrainingConfig& t);
/// keras.callbacks.TensorBoard's arguments into t.tensorboard: scalars,
/// histograms and the graph; no profiling, images or embeddings.
void read_tensorboard(const CallbackInput& in, TrainingConfig& t);

}  // namespace trainer
