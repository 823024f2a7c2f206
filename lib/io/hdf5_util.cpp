#include "io/hdf5_util.h"

namespace trainer::h5 {

namespace {

/// HDF5 closes every object still open when the process exits; a file whose
/// write failed (a full disk) stays open after its failed close, and closing
/// it again at exit crashed (SIGSEGV in H5F__close_cb, exit code 139 instead
/// of 2). The process ends anyway: no cleanup at exit. Runs before main(),
/// before any HDF5 call, as H5dont_atexit requires.
const bool kNoCleanupAtExit = H5dont_atexit() >= 0;

/// The gist of an HDF5 error description: its "error message = '...'" part
/// where there is one (a failed write's text also lists the time, the
/// buffer and the offsets, over two lines), else the text on one line.
std::string gist(std::string desc) {
  const std::string key = "error message = '";
  const size_t at = desc.find(key);
  if (at != std::string::npos) {
    const size_t end = desc.find('\'', at + key.size());
    if (end != std::string::npos) return desc.substr(at + key.size(), end - at - key.size());
  }
  for (char& c : desc)
    if (c == '\n' || c == '\r') c = ' ';
  return desc;
}

herr_t first_description(unsigned n, const H5E_error2_t* err, void* out) {
  auto* s = static_cast<std::string*>(out);
  if (n == 0 && err->desc) *s = err->desc;
  return 0;
}

Handle string_type(bool variable, size_t size) {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
  if (H5Tset_size(t, variable ? H5T_VARIABLE : size) < 0) fail("H5Tset_size");
  if (variable && H5Tset_cset(t, H5T_CSET_UTF8) < 0) fail("H5Tset_cset");
  return t;
}

void write_attribute(hid_t loc, const char* name, hid_t file_type, hid_t space, hid_t mem_type, const void* data) {
  Handle a(H5Acreate2(loc, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
           std::string("creating attribute '") + name + "'");
  // An empty (H5S_NULL) attribute has nothing to write.
  if (H5Sget_simple_extent_npoints(space) > 0 && H5Awrite(a, mem_type, data) < 0) fail(std::string("writing attribute '") + name + "'");
}

Handle open_attribute(hid_t loc, const char* name) {
  if (!has_attribute(loc, name)) throw H5Failure(std::string("missing attribute '") + name + "'");
  return Handle(H5Aopen(loc, name, H5P_DEFAULT), H5Aclose, std::string("opening attribute '") + name + "'");
}

/// Reads all strings of attribute a (scalar: one).
std::vector<std::string> read_string_values(hid_t a, const char* name) {
  Handle type(H5Aget_type(a), H5Tclose, "H5Aget_type");
  if (H5Tget_class(type) != H5T_STRING)
    throw H5Failure(std::string("attribute '") + name + "' is not a string");
  Handle space(H5Aget_space(a), H5Sclose, "H5Aget_space");
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 0) fail(std::string("size of attribute '") + name + "'");
  std::vector<std::string> out;
  if (n == 0) return out;
  if (H5Tis_variable_str(type) > 0) {
    Handle mem = string_type(true, 0);
    // HDF5 converts no variable-length string between ASCII and UTF-8 (h5py writes bytes as ASCII).
    if (H5Tset_cset(mem, H5Tget_cset(type)) < 0) fail("H5Tset_cset");
    std::vector<char*> ptrs(size_t(n), nullptr);
    if (H5Aread(a, mem, ptrs.data()) < 0) fail(std::string("reading attribute '") + name + "'");
    for (char* p : ptrs) {
      out.emplace_back(p ? p : "");
      H5free_memory(p);
    }
    return out;
  }
  const size_t size = H5Tget_size(type);
  Handle mem = string_type(false, size);
  std::vector<char> buf(size_t(n) * size);
  if (H5Aread(a, mem, buf.data()) < 0) fail(std::string("reading attribute '") + name + "'");
  for (hssize_t i = 0; i < n; ++i) {
    std::string s(buf.data() + size_t(i) * size, size);
    s.erase(s.find_last_not_of('\0') + 1);
    out.push_back(s);
  }
  return out;
}

template <typename T>
T read_number(hid_t loc, const char* name, hid_t mem_type) {
  Handle a = open_attribute(loc, name);
  Handle type(H5Aget_type(a), H5Tclose, "H5Aget_type");
  const H5T_class_t cls = H5Tget_class(type);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    throw H5Failure(std::string("attribute '") + name + "' is not a number");
  Handle space(H5Aget_space(a), H5Sclose, "H5Aget_space");
  if (H5Sget_simple_extent_npoints(space) != 1)
    throw H5Failure(std::string("attribute '") + name + "' is not a single number");
  T value{};
  if (H5Aread(a, mem_type, &value) < 0) fail(std::string("reading attribute '") + name + "'");
  return value;
}

herr_t collect_name(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

herr_t collect_link(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

}  // namespace

void fail(const std::string& context) {
  std::string desc;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, first_description, &desc);
  throw H5Failure(desc.empty() ? context : context + ": " + gist(desc));
}

QuietErrors::QuietErrors() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietErrors::~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

void Handle::close(const std::string& context) {
  const hid_t id = id_;
  id_ = -1;
  if (close_(id) < 0) fail(context);
}

void write_string(hid_t loc, const char* name, const std::string& value) {
  Handle type = string_type(true, 0);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  const char* p = value.c_str();
  write_attribute(loc, name, type, space, type, &p);
}

void write_strings(hid_t loc, const char* name, const std::vector<std::string>& values) {
  Handle type = string_type(true, 0);
  const hsize_t n = values.size();
  Handle space(n ? H5Screate_simple(1, &n, nullptr) : H5Screate(H5S_NULL), H5Sclose, "H5Screate");
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  write_attribute(loc, name, type, space, type, ptrs.data());
}

void write_int64(hid_t loc, const char* name, long long value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  write_attribute(loc, name, H5T_STD_I64LE, space, H5T_NATIVE_LLONG, &value);
}

void write_double(hid_t loc, const char* name, double value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  write_attribute(loc, name, H5T_IEEE_F64LE, space, H5T_NATIVE_DOUBLE, &value);
}

bool has_attribute(hid_t loc, const char* name) {
  const htri_t r = H5Aexists(loc, name);
  if (r < 0) fail(std::string("looking up attribute '") + name + "'");
  return r > 0;
}

std::string read_string(hid_t loc, const char* name) {
  Handle a = open_attribute(loc, name);
  std::vector<std::string> v = read_string_values(a, name);
  if (v.size() != 1) throw H5Failure(std::string("attribute '") + name + "' is not a single string");
  return v[0];
}

std::vector<std::string> read_strings(hid_t loc, const char* name) {
  Handle a = open_attribute(loc, name);
  return read_string_values(a, name);
}

long long read_int64(hid_t loc, const char* name) { return read_number<long long>(loc, name, H5T_NATIVE_LLONG); }

double read_double(hid_t loc, const char* name) { return read_number<double>(loc, name, H5T_NATIVE_DOUBLE); }

std::vector<std::string> attribute_names(hid_t loc) {
  std::vector<std::string> names;
  hsize_t idx = 0;
  if (H5Aiterate2(loc, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name, &names) < 0) fail("listing attributes");
  return names;
}

std::vector<std::string> link_names(hid_t loc) {
  std::vector<std::string> names;
  hsize_t idx = 0;
  if (H5Literate(loc, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_link, &names) < 0) fail("listing a group");
  return names;
}

long long attribute_size(hid_t loc, const char* name) {
  Handle a = open_attribute(loc, name);
  Handle space(H5Aget_space(a), H5Sclose, std::string("dataspace of attribute '") + name + "'");
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 0) fail(std::string("size of attribute '") + name + "'");
  return n;
}

void require_hard_links(hid_t loc, const std::string& name, const std::string& path) {
  for (size_t end = name.find('/'); ; end = name.find('/', end + 1)) {
    const std::string part = name.substr(0, end);
    H5L_info_t info;
    if (H5Lexists(loc, part.c_str(), H5P_DEFAULT) <= 0) throw H5Failure("'" + path + "' is missing");
    if (H5Lget_info(loc, part.c_str(), &info, H5P_DEFAULT) < 0) fail("link '" + path + "'");
    if (info.type != H5L_TYPE_HARD)
      throw H5Failure("'" + path + "' is a soft or external link, which a model file does not hold");
    if (end == std::string::npos) return;
  }
}

FloatArray read_float_dataset(hid_t loc, const std::string& name, const std::string& path, size_t max_values) {
  constexpr hsize_t kMaxValues = (hsize_t(1) << 31) - 1;
  if (H5Lexists(loc, name.c_str(), H5P_DEFAULT) <= 0) throw H5Failure("dataset '" + path + "' is missing");
  Handle ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose, "opening dataset '" + path + "'");
  Handle space(H5Dget_space(ds), H5Sclose, "dataspace of '" + path + "'");
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0) fail("rank of '" + path + "'");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space, dims.data(), nullptr) < 0) fail("shape of '" + path + "'");
  FloatArray out;
  size_t count = 1;
  for (hsize_t d : dims) {
    if (d > kMaxValues || (d > 0 && count > kMaxValues / d))
      throw H5Failure("dataset '" + path + "' claims 2^31 values or more, more than any weight holds");
    out.shape.push_back(int(d));
    count *= size_t(d);
  }
  if (count > max_values)
    throw H5Failure("dataset '" + path + "' claims " + std::to_string(count) + " values, more than the file's size " +
                    "can hold");
  out.values.resize(count);
  if (count && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.values.data()) < 0)
    fail("reading dataset '" + path + "'");
  return out;
}

void write_float_dataset(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims, const float* values,
                         const std::string& what) {
  size_t count = 1;
  for (hsize_t d : dims) count *= size_t(d);
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
               H5Sclose, "dataspace of " + what);
  Handle ds(H5Dcreate2(loc, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
            "creating " + what);
  if (count && H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0) fail("writing " + what);
}

}  // namespace trainer::h5
