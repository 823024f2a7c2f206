#pragma once
// Parsing a checkpoint file with libhdf5 in this process. load_checkpoint
// runs it in a process of its own (core/isolated_call.h): libhdf5 can crash,
// loop or allocate without end on a damaged file.
#include <string>

#include "io/checkpoint.h"

namespace trainer {

/// Reads the checkpoint at path, a regular file of `size` bytes, in this
/// process. `where` names it in messages ("checkpoint 'runs/a/last.h5'"). Throws UserError
/// for a file that is not HDF5, not a trainer checkpoint (missing
/// attributes or groups, wrong types, unsupported format_version) or
/// truncated or corrupt (with HDF5's own description); std::bad_alloc when
/// its arrays do not fit in memory. Checks no values (load_checkpoint does).
Checkpoint read_checkpoint_file(const std::string& path, const std::string& where, size_t size);

}  // namespace trainer
