#pragma once
// A Checkpoint sent from the process that parsed it to the one that loads it
// (load_checkpoint, core/isolated_call.h), in core/isolated_wire.h's terms.
#include "core/isolated_call.h"
#include "io/checkpoint.h"

namespace trainer {

/// Writes every field of ckpt to sink.
void send_checkpoint(ChildSink& sink, const Checkpoint& ckpt);

/// Reads what send_checkpoint wrote; throws as ChildOutput::read does,
/// also for a count larger than the child may still send.
Checkpoint receive_checkpoint(ChildOutput& in);

}  // namespace trainer
