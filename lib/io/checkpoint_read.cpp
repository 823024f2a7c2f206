#include "io/checkpoint_read.h"

#include "core/error.h"
#include "io/checkpoint_format.h"
#include "io/hdf5_heap_check.h"
#include "io/hdf5_util.h"

namespace trainer {

namespace {

using checkpoint_format::kFormat;
using checkpoint_format::kVersion;
using checkpoint_format::valid_name;

/// Values a weight or optimizer array may claim (2^31 - 1, the largest shape an int holds, 8 GiB of float32;
/// the largest U-Net weight holds a few million): a damaged or crafted shape must not become an allocation
/// of any size, nor an overflowed one.
constexpr hsize_t kMaxArrayValues = (hsize_t(1) << 31) - 1;

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

Checkpoint read_checkpoint_file(const std::string& path, const std::string& where, size_t size) {
  h5::QuietErrors quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw UserError(where + " is not an HDF5 file (" + std::to_string(size) +
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
  return ckpt;
}

}  // namespace trainer
