#include "io/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <sys/stat.h>

#include "core/build_id.h"
#include "core/error.h"
#include "core/isolated_call.h"
#include "io/atomic_file.h"
#include "io/checkpoint_format.h"
#include "io/checkpoint_read.h"
#include "io/checkpoint_wire.h"
#include "io/hdf5_util.h"

namespace trainer {

namespace {

using checkpoint_format::kFormat;
using checkpoint_format::kVersion;
using checkpoint_format::valid_name;

std::string errno_text() { return std::strerror(errno); }

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// Writes the weights under /model_weights (Keras's layout). Throws InternalError
/// for malformed records, h5::H5Failure for HDF5 errors.
void write_weights(hid_t file, const std::vector<WeightRecord>& weights) {
  h5::Handle root(H5Gcreate2(file, "model_weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                  "creating /model_weights");
  std::vector<std::string> layers;
  std::set<std::string> seen;
  size_t i = 0;
  while (i < weights.size()) {
    const std::string& layer = weights[i].layer;
    if (!valid_name(layer)) throw InternalError("checkpoint: invalid layer name '" + layer + "'");
    if (!seen.insert(layer).second)
      throw InternalError("checkpoint: the records of layer '" + layer + "' are not adjacent");
    layers.push_back(layer);
    h5::Handle group(H5Gcreate2(root, layer.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                     "creating group for layer '" + layer + "'");
    std::vector<std::string> names;
    for (; i < weights.size() && weights[i].layer == layer; ++i) {
      const WeightRecord& w = weights[i];
      const std::string where = "checkpoint: weight '" + layer + "/" + w.name + "'";
      if (!valid_name(w.name)) throw InternalError(where + ": invalid name");
      for (const auto& n : names)
        if (n == w.name) throw InternalError(where + " appears twice");
      std::vector<hsize_t> dims;
      size_t count = 1;
      for (int d : w.shape) {
        if (d < 0) throw InternalError(where + ": negative dimension");
        dims.push_back(hsize_t(d));
        count *= size_t(d);
      }
      if (count != w.values.size())
        throw InternalError(where + ": " + std::to_string(w.values.size()) + " values for a shape of " +
                                    std::to_string(count));
      h5::write_float_dataset(group, w.name, dims, w.values.data(), where);
      names.push_back(w.name);
    }
    h5::write_strings(group, "weight_names", names);
  }
  h5::write_strings(root, "layer_names", layers);
}

/// Writes the whole file at tmp (which exists, empty).
void write_file(const std::string& tmp, const Checkpoint& ckpt) {
  h5::Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose, "creating file");
  h5::write_string(file, "trainer_format", kFormat);
  h5::write_int64(file, "format_version", kVersion);
  h5::write_string(file, "trainer_version", build_id());  // as Keras's keras_version: which build wrote it
  h5::write_string(file, "model_config", ckpt.config_yaml);
  h5::write_int64(file, "epoch", ckpt.epoch);
  {
    h5::Handle logs(H5Gcreate2(file, "logs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "creating /logs");
    for (const auto& kv : ckpt.logs) {
      if (!valid_name(kv.first)) throw InternalError("checkpoint: invalid log name '" + kv.first + "'");
      h5::write_double(logs, kv.first.c_str(), kv.second);
    }
  }
  write_weights(file, ckpt.weights);
  if (!ckpt.state_scalars.empty() || !ckpt.state_arrays.empty() || !ckpt.state_double_arrays.empty()) {
    h5::Handle group(H5Gcreate2(file, "training_state", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                     "creating /training_state");
    for (const auto& [name, value] : ckpt.state_scalars) {
      if (!valid_name(name)) throw InternalError("checkpoint: invalid state name '" + name + "'");
      h5::write_double(group, name.c_str(), value);
    }
    // A 1-D dataset `name` of file type `stored` from n values of memory type `memory`.
    const auto write_array = [&](const std::string& name, hid_t stored, hid_t memory, size_t n, const void* data) {
      if (!valid_name(name) || ckpt.state_arrays.count(name) + ckpt.state_double_arrays.count(name) > 1)
        throw InternalError("checkpoint: invalid or repeated state name '" + name + "'");
      const hsize_t dims[1] = {n};
      h5::Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose, "dataspace of state '" + name + "'");
      h5::Handle ds(H5Dcreate2(group, name.c_str(), stored, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
                    "creating state '" + name + "'");
      if (n && H5Dwrite(ds, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) h5::fail("writing state '" + name + "'");
    };
    for (const auto& [name, values] : ckpt.state_arrays)
      write_array(name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, values.size(), values.data());
    for (const auto& [name, values] : ckpt.state_double_arrays)
      write_array(name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, values.size(), values.data());
  }
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) h5::fail("flushing");
  file.close("closing");
}

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw UserError("cannot sync '" + path + "': " + errno_text());
  const int r = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (r != 0) throw UserError("cannot sync '" + path + "': " + std::strerror(err));
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  const std::string tmp = temp_path(path);
  const PendingTemp pending(tmp);  // removed by a second SIGINT's immediate exit
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw UserError("cannot write checkpoint '" + path + "': " + errno_text() + " (in folder '" + folder_of(path) +
                    "'); check that the folder exists and is writable");
  ::close(fd);
  try {
    {
      h5::QuietErrors quiet;
      write_file(tmp, ckpt);
    }
    fsync_path(tmp, O_RDONLY);
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw UserError("cannot write checkpoint '" + path + "': rename from '" + tmp + "' failed: " + errno_text());
  } catch (const h5::H5Failure& e) {
    std::remove(tmp.c_str());
    throw UserError("cannot write checkpoint '" + path + "': HDF5: " + e.what() + " (is the disk full? free space in '" +
                    folder_of(path) + "' or write elsewhere); the previous file at that path is untouched");
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  // The data is in place; syncing the folder makes the rename itself durable.
  fsync_path(folder_of(path), O_RDONLY | O_DIRECTORY);
}

void refuse_to_replace_checkpoint(const std::string& path, const std::string& fix) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  h5::QuietErrors quiet;
  if (H5Fis_hdf5(path.c_str()) > 0)
    throw UserError("'" + path + "' is an HDF5 file (a checkpoint?) that would be replaced; " + fix);
}

std::string shape_text(const std::vector<int>& shape) {
  std::string s;
  for (int d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

namespace {

/// "<folder>/last.h5, <folder>/final.h5, <folder>/best.h5 and 3 more": the .h5 files in folder, last.h5 and
/// final.h5 first, six at most (a ModelCheckpoint filepath with {epoch} writes one per epoch); "" for none.
std::string checkpoints_in(const std::string& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(folder, ec))
    if (e.path().extension() == ".h5" && e.is_regular_file(ec)) names.push_back(e.path().filename().string());
  auto rank = [](const std::string& n) { return n == "last.h5" ? 0 : n == "final.h5" ? 1 : 2; };
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return std::make_pair(rank(a), a) < std::make_pair(rank(b), b);
  });
  constexpr size_t kShown = 6;
  std::string list;
  for (size_t i = 0; i < std::min(names.size(), kShown); ++i)
    list += (list.empty() ? "" : ", ") + (std::filesystem::path(folder) / names[i]).string();
  if (names.size() > kShown) list += " and " + std::to_string(names.size() - kShown) + " more";
  return list;
}

/// The file's size in bytes; throws UserError naming what path is instead of a regular file, or why it cannot
/// be found, with the checkpoints beside it.
size_t checkpoint_file_size(const std::string& path, const std::string& where) {
  struct stat st {};
  const bool found = ::stat(path.c_str(), &st) == 0;
  if (found && S_ISDIR(st.st_mode)) {  // a run folder: name its checkpoints
    const std::string list = checkpoints_in(path);
    throw UserError("cannot read " + where + ": it is a folder; give the path of a .h5 file written by trainer" +
                    (list.empty() ? std::string(" (the folder holds none)") : ", one of: " + list));
  }
  if (!found) {  // a run that was stopped has no final.h5: name what its folder holds
    const std::string reason = errno_text();  // before the listing sets errno
    const std::string parent = std::filesystem::path(path).parent_path().string();
    const std::string list = checkpoints_in(parent.empty() ? "." : parent);
    throw UserError("cannot read " + where + ": " + reason + "; give the path of a .h5 file written by trainer" +
                    (list.empty() ? std::string() : ", e.g. one of its folder's: " + list));
  }
  if (!S_ISREG(st.st_mode))
    throw UserError("cannot read " + where + ": not a regular file; give the path of a .h5 file written by trainer");
  return size_t(st.st_size);
}

/// read_checkpoint_file in a process of its own (core/isolated_call.h): libhdf5 crashes, loops and
/// allocates without end on some damaged files. Its processor time grows with the file's size (16 MiB/s
/// past 10 s; reading takes far less), its wall time too (1 MiB/s past 10 minutes: a slow disk's pace);
/// its memory may hold the file's size twice over, plus 1 GiB for libhdf5.
Checkpoint read_isolated(const std::string& path, const std::string& where, size_t size) {
  IsolationLimits limits;
  limits.cpu_seconds = 10 + double(size) / double(16 << 20);
  limits.wall_seconds = 600 + double(size) / double(1 << 20);
  limits.extra_bytes = 2 * size + (size_t(1) << 30);
  try {
    return parse_isolated<Checkpoint>(
        limits, {[&] { return read_checkpoint_file(path, where, size); }, send_checkpoint, receive_checkpoint});
  } catch (const IsolatedCallFailed& e) {
    if (e.input_at_fault)
      throw UserError(where + " is a damaged HDF5 file: reading it with libhdf5 " + e.what() +
                      "; use another checkpoint");
    throw UserError("cannot read " + where + ": the process reading it " + e.what());
  }
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
  const std::string where = "checkpoint '" + path + "'";
  Checkpoint ckpt = read_isolated(path, where, checkpoint_file_size(path, where));
  // A NaN can pass through a ReLU unnoticed (the loss stays finite) and make every prediction garbage.
  if (const std::string bad = first_non_finite(ckpt, false); !bad.empty())
    throw UserError(where + ": " + bad +
                    "; the training that wrote it diverged or the file is damaged: use an earlier checkpoint");
  return ckpt;
}

std::string first_non_finite(const Checkpoint& ckpt, bool training_state) {
  auto find = [](const std::vector<float>& v, const std::string& what) -> std::string {
    const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
    if (bad == v.end()) return "";
    return what + " holds " + std::to_string(*bad) + " at index " + std::to_string(bad - v.begin());
  };
  for (const WeightRecord& w : ckpt.weights)
    if (std::string s = find(w.values, "weight '" + w.layer + "/" + w.name + "'"); !s.empty()) return s;
  if (!training_state) return "";
  for (const auto& [name, values] : ckpt.state_arrays)
    if (std::string s = find(values, "training state '" + name + "'"); !s.empty()) return s;
  return "";
}

}  // namespace trainer
