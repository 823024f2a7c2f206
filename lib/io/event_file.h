#pragma once
// TensorBoard event files: the files TensorFlow's tf.summary writers and
// Keras's TensorBoard callback write, which `tensorboard --logdir` reads.
// A file is a sequence of TFRecord records, each holding one serialized Event
// protocol buffer (lib/io/tensorboard_event.proto):
//   uint64 length, uint32 masked_crc32c(length), length bytes, uint32 masked_crc32c(bytes)
// with integers little-endian (TensorFlow's tensorflow/core/lib/io/record_writer.cc
// and crc32c.h define the framing and the mask).
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace trainer {

/// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected, as iSCSI and
/// TFRecord use it; computed by Boost.CRC) of n bytes, masked as TFRecord
/// stores it: ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2^32).
uint32_t masked_crc32c(const void* data, size_t n);

/// The serialized Events of the event file at path, in file order, up to the
/// first record that is cut short or fails its CRC (a run killed while writing
/// leaves a partial last record; TensorBoard stops there too); nothing for a
/// file that cannot be read. damaged (when given) is set to whether reading
/// stopped at a record that fails its CRC, not at the end of the file, a
/// record cut short by it, or zeros where a record would start (the tail a
/// file system may leave after a power loss).
std::vector<std::string> read_event_records(const std::string& path, bool* damaged = nullptr);

/// The event files (names starting "events.out.tfevents.") in folder dir,
/// in name order (their names start with the seconds they were made at).
std::vector<std::string> event_files_in(const std::string& dir);

/// One event file, written as the run goes: every event is flushed to disk
/// when added, so `tensorboard --logdir` shows it at once and a killed run
/// keeps what it wrote. One writer per folder and process (Keras keeps one
/// for <log_dir>/train and one for <log_dir>/validation).
class EventFileWriter {
 public:
  /// Creates folder dir (and its parents) and in it the file
  /// "events.out.tfevents.<unix seconds>.<host>.<pid>.<n>.v2" (n counts this
  /// process's writers, so two never share a name), starting with the event
  /// that names the format ("brain.Event:2"). Throws UserError naming dir or
  /// the file, the system's reason and the fix when either cannot be made.
  explicit EventFileWriter(const std::string& dir);

  /// Adds a scalar (TensorBoard's Scalars tab) named tag at step, stored as
  /// a float32 simple_value as tf.summary's v1 scalars are (TensorBoard reads
  /// these as its scalar plugin's data). Throws UserError naming the file when
  /// the write fails (a full disk).
  void scalar(const std::string& tag, double value, int64_t step);

  /// Adds a histogram (TensorBoard's Histograms and Distributions tabs) of
  /// values named tag at step: min, max, count, sum and sum of squares of the
  /// finite values, counted into `buckets` buckets of equal width from min to
  /// max (tf.summary.histogram's default is 30); a single bucket when all
  /// values are equal; nothing counted for no finite value. Throws as scalar().
  void histogram(const std::string& tag, const std::vector<float>& values, int64_t step, int buckets = 30);

  /// Adds a graph (TensorBoard's Graphs tab): graph_def is a serialized
  /// GraphDef, written at step 0 as tf.summary.graph does. Throws as scalar().
  void graph(const std::string& graph_def);

  /// Adds an event as read by read_event_records (another file's, carried
  /// into this one). Throws as scalar().
  void add_serialized(const std::string& event) { write_record(event); }

  /// Makes what was written durable (fsync(2)), before files it replaces
  /// are removed. Throws UserError naming the file when that fails.
  void sync();

  /// The file's path.
  const std::string& path() const { return path_; }

 private:
  /// Frames the serialized event as a TFRecord, appends and flushes it.
  void write_record(const std::string& event);

  std::string path_;
  std::ofstream out_;
};

}  // namespace trainer
