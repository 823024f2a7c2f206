#pragma once
// Keras's data_format key of the 2-D layers. Tensors here are [N, H, W, C]
// always, so only channels_last is taken.
#include "config/params.h"

namespace trainer {

/// Reads the layer's data_format: channels_last, or null (Keras's default
/// None, which Keras reads as channels_last unless keras.json says
/// otherwise), or absent. UserError at the key for channels_first or any
/// other value.
void read_data_format(ParamReader& p);

}  // namespace trainer
