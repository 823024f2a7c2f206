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
#include "io/atomic_file.h"
#include "io/hdf5_heap_check.h"
#include "io/hdf5_util.h"

namespace trainer {

namespace {

constexpr const char* kFormat = "trainer-checkpoint";
constexpr long long kVersion = 1;
/// Values a weight or optimizer array may claim (2^31 - 1, the largest shape an int holds, 8 GiB of float32;
/// the largest U-Net weight holds a few million): a damaged or crafted shape must not become an allocation
/// of any size, nor an overflowed one.
constexpr hsize_t kMaxArrayValues = (hsize_t(1) << 31) - 1;

std::string errno_text() { return std::strerror(errno); }

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool valid_name(const std::string& s) { return !s.empty() && s != "." && s.find('/') == std::string::npos; }

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

namespace {

/// Reads the weights of an open checkpoint; what() of a failure describes the object.
std::vector<WeightRecord> read_weights(hid_t file) {
  std::vector<WeightRecord> out;
  const htri_t has = H5Lexists(file, "model_weights", H5P_DEFAULT);
  if (has <= 0) throw h5::H5Failure("missing group '/model_weights'");
  h5::Handle root(H5Gopen2(file, "model_weights", H5P_DEFAULT), H5Gclose, "opening group '/model_weights'");
  for (const std::string& layer : h5::read_strings(root, "layer_names")) {
    const std::string gpath = "/model_weights/" + layer;
    if (!valid_name(layer) || H5Lexists(root, layer.c_str(), H5P_DEFAULT) <= 0)
      throw h5::H5Failure("layer_names lists '" + layer + "' but group '" + gpath + "' is missing");
    h5::Handle group(H5Gopen2(root, layer.c_str(), H5P_DEFAULT), H5Gclose, "opening group '" + gpath + "'");
    for (const std::string& name : h5::read_strings(group, "weight_names")) {
      const std::string dpath = gpath + "/" + name;
      if (!valid_name(name) || H5Lexists(group, name.c_str(), H5P_DEFAULT) <= 0)
        throw h5::H5Failure("weight_names lists '" + name + "' but dataset '" + dpath + "' is missing");
      h5::FloatArray array = h5::read_float_dataset(group, name, dpath);
      WeightRecord w;
      w.layer = layer;
      w.name = name;
      w.shape = std::move(array.shape);
      w.values = std::move(array.values);
      out.push_back(std::move(w));
    }
  }
  return out;
}

/// Reads /training_state (absent in weights-only files) into ckpt.
void read_state(hid_t file, Checkpoint& ckpt) {
  if (H5Lexists(file, "training_state", H5P_DEFAULT) <= 0) return;
  h5::Handle group(H5Gopen2(file, "training_state", H5P_DEFAULT), H5Gclose, "opening group '/training_state'");
  for (const std::string& name : h5::attribute_names(group))
    ckpt.state_scalars[name] = h5::read_double(group, name.c_str());
  H5G_info_t info;
  if (H5Gget_info(group, &info) < 0) h5::fail("listing '/training_state'");
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[256];
    if (H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) < 0)
      h5::fail("listing '/training_state'");
    const std::string where = "'/training_state/" + std::string(name) + "'";
    h5::Handle ds(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose, "opening dataset " + where);
    h5::Handle space(H5Dget_space(ds), H5Sclose, "dataspace of " + where);
    const hssize_t count = H5Sget_simple_extent_npoints(space);
    if (count < 0 || H5Sget_simple_extent_ndims(space) != 1) throw h5::H5Failure(where + " is not a 1-D array");
    if (hsize_t(count) > kMaxArrayValues)
      throw h5::H5Failure(where + " claims 2^31 values or more, more than any optimizer state holds");
    h5::Handle type(H5Dget_type(ds), H5Tclose, "type of " + where);
    const bool doubles = H5Tget_class(type) == H5T_FLOAT && H5Tget_size(type) == 8;  // float64: exact counts
    void* data = nullptr;
    if (doubles) {
      std::vector<double>& values = ckpt.state_double_arrays[name];
      values.resize(size_t(count));
      data = values.data();
    } else {
      std::vector<float>& values = ckpt.state_arrays[name];
      values.resize(size_t(count));
      data = values.data();
    }
    if (count && H5Dread(ds, doubles ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
      h5::fail("reading dataset " + where);
  }
}

}  // namespace

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

}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
  const std::string where = "checkpoint '" + path + "'";
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
  h5::QuietErrors quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw UserError(where + " is not an HDF5 file (" + std::to_string(st.st_size) +
                    " bytes, no HDF5 signature); give a .h5 checkpoint written by trainer");
  try {
    h5::check_global_heaps(path);
  } catch (const h5::H5Failure& e) {
    throw UserError(where + " is a damaged HDF5 file (" + e.what() + "); use another checkpoint");
  }
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) {
    try {
      h5::fail("HDF5");
    } catch (const h5::H5Failure& e) {
      throw UserError(where + " is a damaged or truncated HDF5 file (" + e.what() + "); use another checkpoint");
    }
  }
  h5::Handle file(id, H5Fclose, "");
  Checkpoint ckpt;
  try {  // every HDF5 call: a damaged file can fail any of them
    if (!h5::has_attribute(file, "trainer_format"))
      throw UserError(where + " is an HDF5 file but not a trainer checkpoint (no root attribute 'trainer_format'; "
                      "a Keras .h5 model cannot be loaded directly)");
    const std::string format = h5::read_string(file, "trainer_format");
    if (format != kFormat)
      throw h5::H5Failure("attribute 'trainer_format' is '" + format + "', expected '" + kFormat + "'");
    const long long version = h5::read_int64(file, "format_version");
    if (version != kVersion)
      throw h5::H5Failure("format_version " + std::to_string(version) + " is not supported (this trainer reads " +
                          std::to_string(kVersion) + ")");
    ckpt.config_yaml = h5::read_string(file, "model_config");
    ckpt.epoch = int(h5::read_int64(file, "epoch"));
    if (H5Lexists(file, "logs", H5P_DEFAULT) <= 0) throw h5::H5Failure("missing group '/logs'");
    h5::Handle logs(H5Gopen2(file, "logs", H5P_DEFAULT), H5Gclose, "opening group '/logs'");
    for (const std::string& name : h5::attribute_names(logs)) ckpt.logs[name] = h5::read_double(logs, name.c_str());
    ckpt.weights = read_weights(file);
    read_state(file, ckpt);
  } catch (const h5::H5Failure& e) {
    throw UserError(where + " is not a valid trainer checkpoint: " + e.what() +
                    "; the file is damaged or was not written by trainer");
  }
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
