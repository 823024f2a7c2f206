#pragma once
// Checkpoints: one HDF5 file holding the config text, the epoch, its logs and
// every layer's weights in Keras's layout, so h5py users find their way
// (format: docs/checkpoint.md). HDF5 calls are not thread-safe in the Debian
// build: save and load from one thread at a time.
#include <map>
#include <string>
#include <vector>

namespace trainer {

/// One weight array in Keras's layout, e.g. layer "conv2d_1", name "kernel",
/// shape {3, 3, 1, 16} (Conv2D kernel [kh, kw, in, out]); values row-major,
/// values.size() == product of shape.
struct WeightRecord {
  std::string layer, name;
  std::vector<int> shape;
  std::vector<float> values;
};

/// A weight's shape as messages print it: "[3, 3, 8, 16]".
std::string shape_text(const std::vector<int>& shape);

struct Checkpoint {
  std::string config_yaml;               ///< The full config text.
  int epoch = 0;                         ///< 1-based epochs completed.
  std::map<std::string, double> logs;    ///< Metrics of that epoch, e.g. "val_loss".
  std::vector<WeightRecord> weights;     ///< All layers' weights, in model order (a layer's records adjacent).
  /// What --resume needs beyond the weights, under /training_state: named
  /// scalars (attributes: position in the run, optimizer iterations, callback
  /// state, partial sums of an unfinished epoch), named float arrays (1-D
  /// float32 datasets: optimizer slots, best weights kept for
  /// restore_best_weights) and named double arrays (1-D float64 datasets:
  /// the metric counts of an unfinished epoch, exact beyond 2^24). Empty in
  /// a weights-only checkpoint. A name is in one of the three at most.
  std::map<std::string, double> state_scalars;
  std::map<std::string, std::vector<float>> state_arrays;
  std::map<std::string, std::vector<double>> state_double_arrays;
};

/// Writes ckpt to path atomically: to "<path>.tmp-<pid>" in the same folder, flushed
/// and fsync'ed, then rename()d over path (and the folder fsync'ed). On any failure
/// the temp file is removed, an existing file at path is untouched, and it throws:
/// UserError naming the path and the errno text when the folder is missing or not
/// writable or the rename fails; InternalError for malformed records (empty
/// or '/'-containing names, values.size() != product of shape, a layer's records not
/// adjacent, repeated weight names); UserError for HDF5 write failures (e.g. a full disk).
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);

/// For commands that write another kind of file (ONNX export): UserError
/// "'<path>' is an HDF5 file (a checkpoint?) that would be replaced; <fix>"
/// when path exists and holds HDF5 data, so that a mistyped --output cannot
/// destroy a checkpoint.
void refuse_to_replace_checkpoint(const std::string& path, const std::string& fix);

/// The first NaN or infinite value among ckpt's weights and, with
/// training_state, its float training state arrays (optimizer slots, the best
/// weights kept for restore_best_weights), e.g. "weight 'c1a/kernel' holds
/// nan at index 0" or "training state 'optimizer_m' holds inf at index 12";
/// empty when every value is finite. (The state scalars may hold infinities:
/// a callback's best before any epoch.)
std::string first_non_finite(const Checkpoint& ckpt, bool training_state);

/// Reads a checkpoint written by save_checkpoint. Throws UserError naming the path for
/// a missing/unreadable file, a file that is not HDF5, an HDF5 file that is not a
/// trainer checkpoint (missing attributes or groups, wrong types, unsupported
/// format_version), truncated or corrupt contents (with HDF5's own description) and
/// a weight that is NaN or infinite (first_non_finite; a resume checks the
/// training state too, which predict, evaluate and export do not use).
/// libhdf5 parses the file in a process of its own (core/isolated_call.h):
/// a file on which it crashes, or needs more than 10 s plus 1 s per 16 MiB
/// of processor time or more than twice the file's size plus 1 GiB of
/// memory is refused as damaged; a reading process that cannot start, is
/// killed from outside, or waits past 10 minutes plus 1 s per MiB is
/// reported as such (UserError in each case). Throws InternalError when
/// the pipe to that process cannot be made.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace trainer
