#pragma once
// A KerasModelFile sent from the process that parsed the file to the one
// that imports it (read_keras_file, core/isolated_call.h), in
// core/isolated_wire.h's terms: the JSON parts as their text.
#include "core/isolated_call.h"
#include "keras/keras_file.h"

namespace trainer {

/// Writes every field of file to sink.
void send_keras_file(ChildSink& sink, const KerasModelFile& file);

/// Reads what send_keras_file wrote; throws as ChildOutput::read does, also
/// for a count larger than the child may still send.
KerasModelFile receive_keras_file(ChildOutput& in);

}  // namespace trainer
