#include "config/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <tuple>

#include <spdlog/fmt/fmt.h>

#include "config/params.h"
#include "config/sections.h"
#include "config/yaml_text.h"
#include "core/error.h"
#include "core/file_kind.h"

namespace trainer {

namespace {

/// Nodes a config may hold once YAML aliases are expanded (a real one holds a
/// few hundred; ten levels of nine-fold aliases in 1 KB would hold 9^10).
constexpr size_t kMaxConfigNodes = 1000000;
/// Levels a config may nest values (a real one nests fewer than ten): an alias
/// inside its own anchor ('a: &x [*x]') nests without end.
constexpr int kMaxConfigDepth = 100;
/// Bytes a config file may hold (a real one holds a few KB).
constexpr size_t kMaxConfigBytes = size_t(16) << 20;

// The fix for a duplicate key such as '2)' in a { } mapping: the end of a
// Python tuple, whose comma YAML took as the mapping's, as in
// {kernel_size: (2, 2), strides: (2, 2)}: "(2, 2)" becomes the value "(2"
// and the key "2)", and the second tuple repeats that key. name, start: the
// entry read just before the duplicate (its key, and its value when a scalar),
// the tuple's start when it has two items.
std::string split_tuple_fix(const std::string& name, const std::string& start, const std::string& key) {
  if (start.size() < 2 || start[0] != '(' || start.back() == ')')  // three items or more: no sure list to give
    return "a Python tuple in { } is split at its commas into entries; write tuples as YAML lists, e.g. [2, 2]";
  const std::string tuple = start + ", " + key;
  return "'" + name + ": " + tuple + "' is a Python tuple, whose comma splits a { } entry in two ('" + name + ": " +
         start + "' and a key '" + key + "'): write it as a YAML list, " + name + ": [" +
         tuple.substr(1, tuple.size() - 2) + "]";
}

/// The position of the quote that closes the quoted scalar opening at text[open] (YAML's rules: '' inside
/// single quotes, a backslash escape inside double ones); npos when none does (yaml-cpp then ends the
/// value at the end of the text).
size_t closing_quote(const std::string& text, size_t open) {
  const char q = text[open];
  for (size_t i = open + 1; i < text.size(); ++i) {
    if (q == '"' && text[i] == '\\') {
      ++i;
    } else if (text[i] == q) {
      if (q == '\'' && i + 1 < text.size() && text[i + 1] == '\'') ++i;
      else return i;
    }
  }
  return std::string::npos;
}

/// UserError at a quoted scalar that runs past its line into what reads as config, or to the end of the
/// text: a quote left open takes everything up to the next quote as one value (the loss became the rest of
/// the file).
void check_quote(const YAML::Node& scalar, const std::string& text, const std::string& file) {
  const size_t open = size_t(scalar.Mark().pos);
  if (scalar.Mark().pos < 0 || open >= text.size() || (text[open] != '\'' && text[open] != '"')) return;
  const size_t close = closing_quote(text, open), eol = text.find('\n', open);
  if (eol == std::string::npos || close < eol) return;
  // A quoted value may span lines (PyYAML folds long strings so): refused only when it runs to the end or
  // swallows what reads as config, a line that starts with a key or a list entry.
  static const std::regex entry(R"((^|\n)[ \t]*(- |[A-Za-z_][A-Za-z0-9_.]*:( |\n|$)))");
  if (close != std::string::npos && !std::regex_search(text.substr(eol + 1, close - eol - 1), entry)) return;
  const std::string until = close == std::string::npos ? "the end of the file (yaml-cpp closes it there)"
                                                       : "the next one, on line " +
                                                             std::to_string(std::count(text.begin(),
                                                                                       text.begin() + long(close), '\n') + 1);
  throw UserError(yaml_location(file, scalar.Mark()) + ": this quote (" + std::string(1, text[open]) +
                  ") is not closed on its line; YAML then takes everything up to " + until +
                  " as the value: close it, or leave the quotes out");
}

// Refuses keys yaml-cpp reads otherwise than a user means: of two equal keys
// it keeps the first and drops the second silently (a config where `epochs`
// appears twice is almost certainly a mistake), and it takes YAML 1.1's merge
// key '<<' as a key like any other; and quoted values that run past their
// line (check_quote). `visited` counts the nodes walked, aliases expanded,
// against kMaxConfigNodes; depth is node's level (0 at the root),
// against kMaxConfigDepth.
void check_keys(const YAML::Node& node, const std::string& text, const std::string& file, size_t& visited,
                int depth = 0) {
  if (++visited > kMaxConfigNodes)
    throw UserError(file + ": the config holds more than " + std::to_string(kMaxConfigNodes) +
                    " YAML values once its aliases (*name) are expanded; a config holds a few hundred: remove "
                    "the aliases that repeat others");
  if (depth > kMaxConfigDepth)
    throw UserError(yaml_location(file, node.Mark()) + ": values nested more than " +
                    std::to_string(kMaxConfigDepth) + " levels deep (a config nests fewer than ten); an alias inside "
                    "its own anchor, as in 'a: &x [*x]', nests without end: give the value itself");
  if (node.IsScalar()) check_quote(node, text, file);
  if (node.IsSequence()) {
    for (const auto& e : node) check_keys(e, text, file, visited, depth + 1);
  } else if (node.IsMap()) {
    std::map<std::string, YAML::Mark> seen;
    std::string before_key, before_value;  // the previous entry's key, and its value when a scalar
    // (as text: assigning a YAML::Node to another rebinds nothing, it changes the tree)
    for (const auto& kv : node) {
      if (!kv.first.IsScalar())
        throw UserError(yaml_location(file, kv.first.Mark()) +
                        ": a key must be a plain name, not a list or mapping; write 'name: value'");
      check_quote(kv.first, text, file);
      std::string key = kv.first.Scalar();
      // Plain (tag "?") or tagged !!merge; quoted or tagged otherwise, it is a key like any other.
      if (key == "<<" && (kv.first.Tag() == "?" || kv.first.Tag() == "tag:yaml.org,2002:merge"))
        throw UserError(yaml_location(file, kv.first.Mark()) +
                        ": merge keys ('<<: *anchor') are not supported by the config reader (yaml-cpp): write the "
                        "keys out, or give a whole value by its anchor ('optimizer: *adam')");
      auto [it, fresh] = seen.emplace(key, kv.first.Mark());
      if (!fresh)
        throw UserError(yaml_location(file, kv.first.Mark()) + ": duplicate key '" + key +
                        "' (first given at line " + std::to_string(it->second.line + 1) + "); " +
                        (key.size() > 1 && key.back() == ')' ? split_tuple_fix(before_key, before_value, key)
                                                               : "keep only one"));
      before_key = key;
      before_value = kv.second.IsScalar() ? kv.second.Scalar() : "";
      check_keys(kv.second, text, file, visited, depth + 1);
    }
  }
}

}  // namespace

Config parse_config(const std::string& raw, const std::string& path) {
  // A UTF-8 byte order mark (Windows editors write one) is no part of the YAML: yaml-cpp skips it but counts
  // its marks' positions without it.
  const std::string text = raw.compare(0, 3, "\xEF\xBB\xBF") == 0 ? raw.substr(3) : raw;
  refuse_binary(text, path);
  const YAML::Node root = load_one_document(text, path);
  if (!root.IsDefined() || root.IsNull())
    throw UserError(path + ": the config is empty; it needs the sections model, data and training");
  if (root.IsMap() && root["class_name"] && root["config"] && !root["model"])
    throw UserError(path + " is a Keras model (model.to_json()'s JSON), not a trainer config: convert it with "
                    "'trainer import " + path + " --output model.yaml' and give that as --config (docs/from_keras.md)");
  size_t visited = 0;
  check_keys(root, text, path, visited);

  ParamReader top(root, path, "config");
  auto section = [&](const char* key, const char* needs) {
    YAML::Node n = top.get_node(key);
    if (!n)  // placed at a misspelt section's key when there is one
      throw UserError(top.key_where(top.key_given_instead(key)) + ": config: section '" + key + "' is missing; add '" +
                      key + ":' with " + needs + top.given_instead(key));
    return n;
  };
  YAML::Node model = section("model", "'layers:', a list starting with {type: Input, shape: [H, W, C]}");
  YAML::Node data = section("data", "'images: <folder>' and 'masks: <folder>'");
  YAML::Node training = section("training", "at least 'epochs: <n>'");
  top.finish();

  Config cfg;
  cfg.path = path;
  cfg.text = text;
  cfg.model = read_model_section(model, path);
  cfg.data = read_data_section(data, path);
  cfg.training = read_training_section(training, path, cfg.data.has_validation());
  return cfg;
}

Config load_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UserError(path + ": is a folder, not a config file; give --config the YAML file (e.g. configs/unet.yaml)");
  require_plain_file(path, "--config", "give --config the YAML file (e.g. configs/unet.yaml); a config piped in "
                                       "must be written to a file first");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UserError(path + ": cannot open the config file; check the path given to --config");
  // Read at most kMaxConfigBytes + 1 bytes: --config /dev/zero must not fill the memory.
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  if (in.bad()) throw UserError(path + ": cannot read the config file");
  text.resize(size_t(in.gcount()));
  if (text.size() > kMaxConfigBytes)
    throw UserError(path + ": the config file is larger than " + std::to_string(kMaxConfigBytes >> 20) +
                    " MiB; a config is a few KB of YAML: check the path given to --config");
  return parse_config(text, path);
}

namespace {

/// [low, high] from a number z ([1 - z, 1 + z]) or a list of two (Keras's
/// zoom_range form); brightness_range takes the list form only.
std::pair<double, double> read_range(ParamReader& p, const std::string& key, bool number_allowed,
                                     const std::string& example) {
  const YAML::Node v = p.get_node(key);
  double lo = 0, hi = 0;
  if (number_allowed && v.IsScalar() && YAML::convert<double>::decode(v, lo)) {
    if (!(lo >= 0 && lo < 1)) p.fail(key, "must be in [0, 1) as a number (the range [1 - z, 1 + z]), or a list [low, high]");
    return {1 - lo, 1 + lo};
  }
  if (!v.IsSequence() || v.size() != 2 || !YAML::convert<double>::decode(v[0], lo) ||
      !YAML::convert<double>::decode(v[1], hi))
    p.fail(key, std::string("must be ") + (number_allowed ? "a number or " : "") + "a list [low, high], e.g. " +
                    example + python_tuple_hint(YAML::Dump(v)));
  if (!(lo > 0 && lo <= hi && std::isfinite(hi)))
    p.fail(key, "must be [low, high] with 0 < low <= high, e.g. " + example);
  return {lo, hi};
}

/// ImageDataGenerator arguments that data.augmentation refuses, each with why.
const std::vector<std::string> kUnsupportedGeneratorKeys = {
    "rescale", "validation_split", "channel_shift_range", "featurewise_center", "samplewise_center",
    "featurewise_std_normalization", "samplewise_std_normalization", "zca_whitening", "zca_epsilon",
    "interpolation_order", "preprocessing_function", "dtype", "data_format"};

/// Why ImageDataGenerator argument `key` (of kUnsupportedGeneratorKeys) is refused, with the fix.
std::string unsupported_generator_key(const std::string& key) {
  if (key == "rescale") return "is not an augmentation here: scale the pixels with a Rescaling layer at the model's start";
  if (key == "validation_split") return "belongs in the data section: data.validation_split";
  return "is an ImageDataGenerator argument that is not supported; remove it (docs/config.md lists the "
         "augmentation keys)";
}

/// A shift range: a number (a fraction below 1, pixels from 1); Keras's list of choices is refused.
double read_shift(ParamReader& p, const std::string& key) {
  if (p.has(key) && p.get_node(key).IsSequence())
    p.fail(key, "is a list: Keras's list of pixel choices is not supported; give a number r for a shift by U(-r, r) "
                "(a fraction of the size below 1, pixels from 1), e.g. 0.1");
  return p.get_double(key, 0.0, 0.0);
}

}  // namespace

void read_affine_augmentation(ParamReader& p, AugmentationConfig& a) {
  for (const std::string& key : kUnsupportedGeneratorKeys)
    if (p.has(key)) p.fail(key, unsupported_generator_key(key));
  a.rotation_range = p.get_double("rotation_range", 0.0, 0.0, 360.0);
  a.width_shift_range = read_shift(p, "width_shift_range");
  a.height_shift_range = read_shift(p, "height_shift_range");
  a.shear_range = p.get_double("shear_range", 0.0, 0.0, 89.0);
  p.skip("zoom_range");  // known (for the unknown-key message) when absent too
  if (p.given("zoom_range")) std::tie(a.zoom_low, a.zoom_high) = read_range(p, "zoom_range", true, "[0.8, 1.2]");
  a.fill_mode = FillMode(choice_index(p.get_string("fill_mode", std::string(fill_mode_name(a.fill_mode)),
                                                   fill_mode_names()),
                                      fill_mode_names()));
  a.cval = p.get_double("cval", 0.0, 0.0, 255.0);
  p.skip("brightness_range");
  if (p.given("brightness_range"))
    std::tie(a.brightness_low, a.brightness_high) = read_range(p, "brightness_range", false, "[0.8, 1.2]");
}

namespace {

/// data.crop: a map of CropConfig's keys ({} for the defaults).
CropConfig read_crop(const YAML::Node& node, const std::string& file) {
  CropConfig c;
  c.where = yaml_location(file, node.Mark()) + ": data.crop";
  if (!node.IsMap() && !(node.IsNull()))
    throw UserError(c.where + " must be a map of its settings ({} for the defaults: scale 1, foreground 0.333, "
                    "per_image 1, tile_overlap 0.5, tile_blend gaussian)");
  if (node.IsNull()) return c;
  ParamReader p(node, file, "data.crop");
  c.scale = p.get_double("scale", c.scale, 1e-3, 1e3);
  c.foreground = p.get_double("foreground", c.foreground, 0.0, 1.0);
  c.per_image = p.get_int("per_image", c.per_image, 1, 10000);
  c.tile_overlap = p.get_double("tile_overlap", c.tile_overlap, 0.0, 1.0);
  if (c.tile_overlap >= 1.0)
    p.fail("tile_overlap", "must be below 1 (the fraction of a tile's side that its neighbours share, e.g. 0.5)");
  c.tile_blend = p.get_string("tile_blend", c.tile_blend, std::vector<std::string>{"gaussian", "linear"});
  p.finish();
  return c;
}

}  // namespace

DataConfig read_data_section(const YAML::Node& node, const std::string& file) {
  ParamReader p(node, file, "data");
  // fit()'s arguments and the training section's keys, where a Keras user may put them.
  for (const char* key : {"batch_size", "batch_size_per_device", "epochs", "steps_per_epoch", "class_weight", "seed"})
    if (p.has(key))
      p.fail(key, "is a training setting here; move it to the training section: training." + std::string(key));
  DataConfig d;
  // Known before 'images' is looked for, so that a missing 'images' is not said to be misspelt as them (both
  // asked: each call marks its key as read).
  const bool validation_images = p.has_optional("validation_images");
  const bool validation_folders = p.has_optional("validation_masks") || validation_images;
  d.images = p.get_path("images", std::nullopt);
  d.masks = p.get_path("masks", std::nullopt);
  d.mask_suffix = p.get_string("mask_suffix", d.mask_suffix);
  for (const char* ext : {".png", ".tif", ".tiff", ".jpg", ".jpeg", ".bmp"})
    if (const std::string e = ext; d.mask_suffix.size() >= e.size() &&
                                   ascii_lower(d.mask_suffix).compare(d.mask_suffix.size() - e.size(), e.size(), e) == 0)
      p.fail("mask_suffix", "is '" + d.mask_suffix + "', which ends in a file extension; it is the end of a mask's "
                            "name before the extension (any image type is read): write '" +
                                d.mask_suffix.substr(0, d.mask_suffix.size() - e.size()) + "'");
  d.validation_split = p.get_double("validation_split", d.validation_split);
  if (!(d.validation_split >= 0.0 && d.validation_split < 1.0))
    p.fail("validation_split", "must be in [0, 1), the fraction of pairs held out (e.g. 0.1), got " +
                                   fmt::format("{}", d.validation_split));
  if (validation_folders) {
    d.validation_images = p.get_path("validation_images", std::nullopt);
    d.validation_masks = p.get_path("validation_masks", std::nullopt);
    if (d.validation_images.empty() || d.validation_masks.empty())
      p.fail(d.validation_images.empty() ? "validation_images" : "validation_masks",
             "is empty; name the folder of validation images and the folder of their masks");
    if (d.validation_split > 0)
      p.fail("validation_split",
             "is given with validation_images: the validation pairs come from one or the other; remove "
             "validation_split (Keras's validation_data overrides it) or the validation folders");
  }
  d.shuffle = p.get_bool("shuffle", d.shuffle);
  d.skip_bad_files = p.get_bool("skip_bad_files", d.skip_bad_files);
  d.loader_threads = p.get_int("loader_threads", d.loader_threads, 0, 1024);
  if (p.has("max_image_pixels") && !p.given("max_image_pixels")) d.max_image_pixels = 0;  // null: no limit
  else d.max_image_pixels = p.get_int("max_image_pixels", int(d.max_image_pixels), 1);
  if (YAML::Node c = p.get_node("crop")) d.crop = read_crop(c, file);
  if (YAML::Node a = p.get_node("augmentation")) {
    ParamReader ap(a, file, "data.augmentation");
    d.augmentation.where = yaml_location(file, a.Mark()) + ": data.augmentation";
    d.augmentation.horizontal_flip = ap.get_bool("horizontal_flip", false);
    d.augmentation.vertical_flip = ap.get_bool("vertical_flip", false);
    d.augmentation.rotate_90 = ap.get_bool("rotate_90", false);
    read_affine_augmentation(ap, d.augmentation);
    ap.finish();
  }
  p.finish();
  return d;
}

}  // namespace trainer
