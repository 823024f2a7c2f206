#pragma once
// Small RAII and attribute helpers over the HDF5 1.10 C API, used by the
// checkpoint reader and writer. Failures throw H5Failure carrying HDF5's own
// description of the innermost error; callers turn it into a message that
// names the file.
#include <hdf5.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace trainer::h5 {

/// An HDF5 call failed; what() is "<context>: <HDF5's description>".
class H5Failure : public std::runtime_error {
 public:
  explicit H5Failure(const std::string& msg) : std::runtime_error(msg) {}
};

/// Throws H5Failure("<context>: <innermost HDF5 error>"). Call right after the failing call.
[[noreturn]] void fail(const std::string& context);

/// Silences HDF5's automatic error printing for its lifetime (this thread), restoring it after.
class QuietErrors {
 public:
  QuietErrors();
  ~QuietErrors();
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

/// Owns an hid_t and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer close, const std::string& context) : id_(id), close_(close) {
    if (id_ < 0) fail(context);
  }
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle& operator=(Handle&&) = delete;
  operator hid_t() const { return id_; }
  /// Closes now and reports a failure (used for the file, whose close flushes).
  void close(const std::string& context);

 private:
  hid_t id_;
  Closer close_;
};

/// Writers of attributes on loc (a file or group). Strings are variable-length UTF-8.
void write_string(hid_t loc, const char* name, const std::string& value);
void write_strings(hid_t loc, const char* name, const std::vector<std::string>& values);
void write_int64(hid_t loc, const char* name, long long value);
void write_double(hid_t loc, const char* name, double value);

/// Whether loc has attribute name.
bool has_attribute(hid_t loc, const char* name);
/// Readers; strings may be variable- or fixed-length. Throw H5Failure on a
/// missing attribute or a wrong type.
std::string read_string(hid_t loc, const char* name);
std::vector<std::string> read_strings(hid_t loc, const char* name);
long long read_int64(hid_t loc, const char* name);
double read_double(hid_t loc, const char* name);
/// Names of all attributes of loc, in name order.
std::vector<std::string> attribute_names(hid_t loc);
/// Names of the links (groups, datasets) in group loc, in name order.
std::vector<std::string> link_names(hid_t loc);
/// The number of elements of attribute name of loc (0 for an empty array,
/// which h5py writes for an empty list whatever its type).
long long attribute_size(hid_t loc, const char* name);

/// A float dataset's shape and values (row-major).
struct FloatArray {
  std::vector<int> shape;
  std::vector<float> values;
};
/// Reads dataset name of loc (path: its full name, for messages) as float32,
/// converting from its stored type (float16, float64, ...). Throws H5Failure
/// for a missing dataset, a failed read, or more than max_values values
/// (2^31 - 1 at most: more than any weight holds).
FloatArray read_float_dataset(hid_t loc, const std::string& name, const std::string& path,
                              size_t max_values = (size_t(1) << 31) - 1);
/// Throws H5Failure unless every link on the relative path name from loc
/// ("conv2d/kernel:0") is a hard link: a file from elsewhere must not lead
/// the reader into another file (an external link) or round a soft link.
void require_hard_links(hid_t loc, const std::string& name, const std::string& path);
/// Writes dataset name of loc: float32 little-endian of shape dims (a scalar
/// when dims is empty) from values (the product of dims of them). what names
/// it in H5Failure's message.
void write_float_dataset(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims, const float* values,
                         const std::string& what);

}  // namespace trainer::h5
