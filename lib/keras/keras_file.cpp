#include "keras/keras_file.h"

#include <zip.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <sys/stat.h>

#include "core/error.h"
#include "core/isolated_call.h"
#include "io/hdf5_heap_check.h"
#include "keras/keras_file_wire.h"

namespace trainer {

namespace {

constexpr long long kMaxJsonBytes = 256LL << 20;  // a model config is kilobytes; this is no config
constexpr int kMaxJsonDepth = 200;  // a layer's config nests a few levels; copies and == recurse per level

/// The deepest nesting of [ and { in JSON text, strings skipped.
int json_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::string read_head(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string head(n, '\0');
  in.read(head.data(), std::streamsize(n));
  head.resize(size_t(in.gcount()));
  return head;
}

/// The whole of entry name of an open zip (at most max_bytes); "" with found false when it is absent.
std::string zip_entry(zip_t* z, const char* name, const std::string& where, bool& found, long long max_bytes) {
  found = false;
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(z, name, 0, &st) != 0) return "";
  found = true;
  // Keras stores its entries uncompressed; deflate packs at most about 1000:1, so more is a damaged file
  // (or a zip bomb), not a model.
  const bool sized = (st.valid & ZIP_STAT_SIZE) && (st.valid & ZIP_STAT_COMP_SIZE);
  if (!sized || st.size > zip_uint64_t(max_bytes) || st.size > 1100 * st.comp_size + (1 << 20))
    throw UserError(where + ": its entry '" + name + "' claims an impossible size; the file is damaged");
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen(z, name, 0), zip_fclose);
  if (!f) throw UserError(where + ": cannot read its entry '" + name + "': " + zip_strerror(z) + "; the file is damaged");
  std::string data(size_t(st.size), '\0');
  zip_int64_t got = 0;
  while (got < zip_int64_t(st.size)) {
    const zip_int64_t n = zip_fread(f.get(), data.data() + got, st.size - zip_uint64_t(got));
    if (n <= 0) throw UserError(where + ": its entry '" + name + "' is cut short; the file is damaged");
    got += n;
  }
  return data;
}

/// Opens HDF5 data held in memory (the core driver over a copy of image).
h5::Handle open_h5_image(const std::string& image, const std::string& what) {
  h5::check_global_heaps(image.size(), [&](size_t offset, size_t n, char* out) {
    if (offset >= image.size()) return size_t(0);
    const size_t got = std::min(n, image.size() - offset);
    std::copy_n(image.data() + offset, got, out);
    return got;
  });
  h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access list for " + what);
  if (H5Pset_fapl_core(fapl, 1 << 16, 0) < 0) h5::fail("core driver for " + what);
  if (H5Pset_file_image(fapl, const_cast<char*>(image.data()), image.size()) < 0) h5::fail("image of " + what);
  return h5::Handle(H5Fopen("model.weights.h5", H5F_ACC_RDONLY, fapl), H5Fclose, "opening " + what);
}

/// How many float values the weights of a file of `bytes` bytes may claim in all: compressed
/// datasets shrink at most about 1000:1, so more is a damaged file, not weights to allocate.
struct WeightBudget {
  explicit WeightBudget(size_t bytes) : values((1100 * bytes + (64 << 20)) / sizeof(float)) {}
  size_t values;
  /// Reads dataset name of loc (hard links only) within the budget.
  h5::FloatArray read(hid_t loc, const std::string& name, const std::string& path) {
    h5::require_hard_links(loc, name, path);
    h5::FloatArray a = h5::read_float_dataset(loc, name, path, values);
    values -= a.values.size();
    return a;
  }
};

/// Keras 3's weights file: /layers/<name>/vars/0, 1, ... (saving_lib's H5IOStore).
std::vector<KerasLayerWeights> read_numbered_weights(hid_t file, WeightBudget budget) {
  std::vector<KerasLayerWeights> out;
  if (H5Lexists(file, "layers", H5P_DEFAULT) <= 0) return out;
  h5::Handle layers(H5Gopen2(file, "layers", H5P_DEFAULT), H5Gclose, "opening group '/layers'");
  for (const std::string& layer : h5::link_names(layers)) {
    const std::string vars_path = layer + "/vars";
    if (H5Lexists(layers, layer.c_str(), H5P_DEFAULT) <= 0 || H5Lexists(layers, vars_path.c_str(), H5P_DEFAULT) <= 0)
      continue;
    h5::require_hard_links(layers, vars_path, "/layers/" + vars_path);
    h5::Handle vars(H5Gopen2(layers, vars_path.c_str(), H5P_DEFAULT), H5Gclose, "opening '/layers/" + vars_path + "'");
    KerasLayerWeights w;
    w.layer = layer;
    for (int i = 0;; ++i) {
      const std::string index = std::to_string(i);
      if (H5Lexists(vars, index.c_str(), H5P_DEFAULT) <= 0) break;
      w.arrays.push_back(budget.read(vars, index, "/layers/" + vars_path + "/" + index));
    }
    if (!w.arrays.empty()) out.push_back(std::move(w));
  }
  return out;
}

/// A legacy .h5 model's /model_weights: @layer_names, each layer's @weight_names ("conv2d/kernel:0").
std::vector<KerasLayerWeights> read_named_weights(hid_t file, WeightBudget budget) {
  std::vector<KerasLayerWeights> out;
  h5::require_hard_links(file, "model_weights", "/model_weights");
  h5::Handle root(H5Gopen2(file, "model_weights", H5P_DEFAULT), H5Gclose, "opening group '/model_weights'");
  for (const std::string& layer : h5::read_strings(root, "layer_names")) {
    h5::require_hard_links(root, layer, "/model_weights/" + layer);
    h5::Handle group(H5Gopen2(root, layer.c_str(), H5P_DEFAULT), H5Gclose, "opening '/model_weights/" + layer + "'");
    if (h5::attribute_size(group, "weight_names") == 0) continue;  // h5py's empty list is a float array
    KerasLayerWeights w;
    w.layer = layer;
    for (const std::string& path : h5::read_strings(group, "weight_names")) {
      std::string name = path.substr(path.rfind('/') + 1);
      if (name.size() > 2 && name.compare(name.size() - 2, 2, ":0") == 0) name.resize(name.size() - 2);
      w.names.push_back(name);
      w.arrays.push_back(budget.read(group, path, "/model_weights/" + layer + "/" + path));
    }
    out.push_back(std::move(w));
  }
  return out;
}

KerasModelFile read_zip(const std::string& path) {
  const std::string where = "'" + path + "' (a .keras file)";
  int err = 0;
  std::unique_ptr<zip_t, void (*)(zip_t*)> z(zip_open(path.c_str(), ZIP_RDONLY, &err), zip_discard);
  if (!z) {
    zip_error_t e;
    zip_error_init_with_code(&e, err);
    const std::string reason = zip_error_strerror(&e);
    zip_error_fini(&e);
    throw UserError(where + " cannot be opened as a zip: " + reason + "; the file is damaged or cut short");
  }
  bool found = false;
  const std::string config = zip_entry(z.get(), "config.json", where, found, kMaxJsonBytes);
  if (!found)
    throw UserError(where + " holds no config.json: it is a zip but not a Keras 3 model file; save the model with "
                    "model.save(\"model.keras\")");
  KerasModelFile f = parse_keras_json(config, where + ", config.json");
  f.format = KerasFormat::Keras;
  const std::string metadata = zip_entry(z.get(), "metadata.json", where, found, kMaxJsonBytes);
  if (found) {
    const KerasJson m = KerasJson::parse(metadata, nullptr, false);
    if (m.is_object() && m.contains("keras_version") && m["keras_version"].is_string())
      f.keras_version = m["keras_version"].get<std::string>();
  }
  const std::string image = zip_entry(z.get(), "model.weights.h5", where, found, 16LL << 30);
  if (!found && zip_name_locate(z.get(), "model.weights.npz", 0) >= 0)
    throw UserError(where + " keeps its weights as model.weights.npz, which trainer does not read; save the model "
                    "with Keras's default weights format (model.save(\"model.keras\")) and import that");
  if (found) {
    h5::QuietErrors quiet;
    try {
      h5::Handle file = open_h5_image(image, "model.weights.h5");
      f.weights = read_numbered_weights(file, WeightBudget(image.size()));
    } catch (const h5::H5Failure& e) {
      throw UserError(where + ": its model.weights.h5 cannot be read (" + e.what() + "); the file is damaged");
    }
  }
  return f;
}

KerasModelFile read_h5(const std::string& path, size_t bytes) {
  const std::string where = "'" + path + "' (an HDF5 file)";
  h5::QuietErrors quiet;
  try {
    h5::check_global_heaps(path);
  } catch (const h5::H5Failure& e) {
    throw UserError(where + " cannot be read: " + e.what() + "; the file is damaged");
  }
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw UserError(where + " cannot be opened: it is damaged or cut short");
  h5::Handle file(id, H5Fclose, "");
  KerasModelFile f;
  try {  // every HDF5 call: a damaged file can fail any of them
    if (h5::has_attribute(file, "trainer_format"))
      throw UserError(where + " is a trainer checkpoint, not a Keras model: there is nothing to import; start a run "
                      "from it with --initial-weights, or predict with it");
    if (!h5::has_attribute(file, "model_config"))
      throw UserError(where + " holds no model_config: it has weights only (Keras's save_weights), not the model; "
                      "save the model with model.save(\"model.keras\") or model.save(\"model.h5\") and import that");
    f = parse_keras_json(h5::read_string(file, "model_config"), where + ", attribute model_config");
    if (h5::has_attribute(file, "training_config")) {
      const KerasJson t = KerasJson::parse(h5::read_string(file, "training_config"), nullptr, false);
      if (t.is_object()) f.compile = t;
    }
    if (h5::has_attribute(file, "keras_version")) f.keras_version = h5::read_string(file, "keras_version");
    if (H5Lexists(file, "model_weights", H5P_DEFAULT) > 0) f.weights = read_named_weights(file, WeightBudget(bytes));
  } catch (const h5::H5Failure& e) {
    throw UserError(where + " cannot be read as a Keras model: " + e.what() + "; the file is damaged");
  }
  f.format = KerasFormat::LegacyH5;
  return f;
}

/// read_zip or read_h5 in a process of their own (core/isolated_call.h): libzip and libhdf5 may crash,
/// loop or allocate without end on a damaged file. Time as for a checkpoint (io/checkpoint.h); memory may
/// hold the file four times over (a .keras file's weights file read whole, the weights, their compressed
/// chunks), plus 1 GiB for the libraries.
KerasModelFile read_isolated(const std::string& path, size_t size, bool zip) {
  IsolationLimits limits;
  limits.cpu_seconds = 10 + double(size) / double(16 << 20);
  limits.wall_seconds = 600 + double(size) / double(1 << 20);
  limits.extra_bytes = 4 * size + (size_t(1) << 30);
  const std::string where = "'" + path + "' (" + (zip ? "a .keras file" : "an HDF5 file") + ")";
  try {
    return parse_isolated<KerasModelFile>(
        limits, {[&] { return zip ? read_zip(path) : read_h5(path, size); }, send_keras_file, receive_keras_file});
  } catch (const IsolatedCallFailed& e) {
    if (e.input_at_fault)
      throw UserError(where + " is damaged: reading it with " + (zip ? "libzip and libhdf5 " : "libhdf5 ") +
                      e.what() + "; save the model again and import that");
    throw UserError("cannot read " + where + ": the process reading it " + e.what());
  }
}

}  // namespace

const char* keras_format_name(KerasFormat format) {
  switch (format) {
    case KerasFormat::Keras: return ".keras file";
    case KerasFormat::LegacyH5: return "legacy .h5 model";
    case KerasFormat::Json: return "model.to_json() file";
  }
  return "";
}

KerasModelFile parse_keras_json(const std::string& text, const std::string& where) {
  if (json_depth(text) > kMaxJsonDepth)
    throw UserError(where + " nests its JSON more than " + std::to_string(kMaxJsonDepth) +
                    " levels deep, which no Keras model config does; the file is damaged");
  KerasJson j;
  try {
    j = KerasJson::parse(text);
  } catch (const KerasJson::parse_error& e) {
    throw UserError(where + " is not valid JSON (" + e.what() + "); give the file that model.to_json() wrote");
  }
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string() || !j.contains("config") ||
      !j["config"].is_object())
    throw UserError(where + " is JSON but not a Keras model config (no 'class_name' and 'config'); give the text of "
                    "model.to_json(), a .keras file or an .h5 model");
  KerasModelFile f;
  f.format = KerasFormat::Json;
  f.model = {{"class_name", j["class_name"]}, {"config", j["config"]}};
  if (j.contains("compile_config") && j["compile_config"].is_object()) f.compile = j["compile_config"];
  if (j.contains("keras_version") && j["keras_version"].is_string())
    f.keras_version = j["keras_version"].get<std::string>();
  return f;
}

bool written_by_trainer_export(const std::string& path) {
  int err = 0;
  std::unique_ptr<zip_t, void (*)(zip_t*)> z(zip_open(path.c_str(), ZIP_RDONLY, &err), zip_discard);
  if (!z) return false;
  try {
    bool found = false;
    const std::string metadata = zip_entry(z.get(), "metadata.json", path, found, 1 << 20);
    return found && !json_text(KerasJson::parse(metadata, nullptr, false), "trainer_version").empty();
  } catch (const UserError&) {
    return false;
  }
}

KerasModelFile read_keras_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw UserError("cannot read '" + path + "': no such file; give a Keras model file (.keras, .h5 or the text of "
                    "model.to_json())");
  const std::string head = read_head(path, 8);
  if (head.rfind("PK\x03\x04", 0) == 0 || head == std::string("\x89HDF\r\n\x1a\n", 8))
    return read_isolated(path, size_t(st.st_size), head[0] == 'P');
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && head[first] == '{') {
    if (st.st_size > kMaxJsonBytes)
      throw UserError("'" + path + "' is " + std::to_string(st.st_size >> 20) +
                      " MiB of text, far more than a model config; give the text of model.to_json()");
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return parse_keras_json(text.str(), "'" + path + "'");
  }
  throw UserError("'" + path + "' is not a Keras model file: neither a .keras zip, an HDF5 model nor JSON text; save "
                  "the model with model.save(\"model.keras\") and import that");
}

}  // namespace trainer
