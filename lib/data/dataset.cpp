#include "data/dataset.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <exception>
#include <map>
#include <numeric>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <opencv2/imgproc.hpp>

#include "backend/train_math.h"
#include "core/error.h"
#include "data/image_files.h"
#include "data/held_samples.h"
#include "data/image_decode.h"

namespace trainer {

namespace fs = std::filesystem;

namespace {

std::string prefix(const DataOptions& o) { return o.config_path.empty() ? "" : o.config_path + ": "; }

// "data" or, for the validation folders, "data (validation pairs)"; what the
// pairs are for ("train" / "validate").
std::string section(const DataOptions& o) { return o.key_prefix.empty() ? "data" : "data (validation pairs)"; }
std::string use(const DataOptions& o) { return o.key_prefix.empty() ? "train" : "validate"; }

// Supported image files of dir (names only), sorted; throws when dir is missing.
std::vector<std::string> list_images(const DataOptions& o, const std::string& dir,
                                     const char* key) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UserError(prefix(o) + "data." + o.key_prefix + key + ": '" + dir + "' " +
                    (fs::exists(dir, ec) ? "is a file, not a folder" : "does not exist") +
                    "; fix the path (relative paths start at the working directory '" +
                    fs::current_path(ec).string() + "')");
  std::vector<std::string> names;
  for (const std::string& path : images_in_folder(dir, prefix(o) + "data." + o.key_prefix + key))
    names.push_back(fs::path(path).filename().string());
  return names;
}

// " a; b; ...; and 3 more": at most 10 items, on one line (UserError messages are one line).
std::string list_up_to_10(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < 10; ++i) s += (i ? "; " : " ") + items[i];
  if (items.size() > 10) s += "; and " + std::to_string(items.size() - 10) + " more";
  return s;
}

// Why folder dir, holding no image, may still be the user's data: ", but its folders hold the 2018 Data Science
// Bowl layout ..." when a folder of it has an images/ folder (<id>/images/<id>.png, <id>/masks/*.png), ", but its
// subfolders hold images ..." when one holds image files; else "".
std::string layout_hint(const std::string& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && fs::is_directory(it->path() / "images", ec))
      return ", but its folders hold the 2018 Data Science Bowl layout (<id>/images/, <id>/masks/): convert it "
             "to image and mask folders with build/data_tools/dsb_to_flat -i '" + dir +
             "' -o <folder> (data_tools/README.md)";
  // Images in plate1/, plate2/ under the folder given.
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec)) continue;
    std::error_code inner;
    for (fs::directory_iterator f(it->path(), inner), fend; !inner && f != fend; f.increment(inner))
      if (is_image_file(f->path().string()))
        return ", but its subfolders hold images (e.g. '" + f->path().string() + "'): only a folder's own files "
               "are read, not its subfolders'; give the subfolder, or gather the images into one folder";
  }
  return "";
}

/// stem is a mask's name: it ends with a non-empty suffix and has more before it.
bool ends_with_suffix(const std::string& stem, const std::string& suffix) {
  return !suffix.empty() && stem.size() > suffix.size() &&
         stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<ImagePair> find_image_pairs(const DataOptions& o) {
  std::vector<std::string> images = list_images(o, o.images_dir, "images");
  std::vector<std::string> masks = list_images(o, o.masks_dir, "masks");
  const std::string exts = ".png, .jpg, .jpeg, .tif, .tiff (any case)";
  if (images.empty())
    throw UserError(prefix(o) + "data." + o.key_prefix + "images: no images in '" + o.images_dir + "' (looked for " + exts + ")" +
                    layout_hint(o.images_dir) + "; fix the path or add images");

  std::map<std::string, std::string> mask_by_stem;  // first in name order wins
  for (const auto& m : masks) mask_by_stem.emplace(fs::path(m).stem().string(), m);

  // Images and masks may share one folder: then the masks are not images.
  std::error_code ec;
  if (fs::equivalent(o.images_dir, o.masks_dir, ec)) {
    if (o.mask_suffix.empty())
      throw UserError(prefix(o) + "data." + o.key_prefix + "masks: '" + o.masks_dir + "' is the images' folder and "
                      "data.mask_suffix is empty, so each image would be its own mask: give the masks' own folder, "
                      "or the end of a mask's name in this one (mask_suffix: _mask for a.png's a_mask.png)");
    images = without_masks(images, o.mask_suffix);
  }
  // Two images of one stem would both take its mask, and could fall one into training, one into validation.
  std::map<std::string, std::string> image_by_stem;
  for (const auto& name : images) {
    const std::string stem = fs::path(name).stem().string();
    const auto [it, fresh] = image_by_stem.emplace(stem, name);
    if (!fresh)
      throw UserError(prefix(o) + "data." + o.key_prefix + "images: '" + it->second + "' and '" + name + "' in '" +
                      o.images_dir + "' have one name, '" + stem + "', so both would take the mask " + stem +
                      o.mask_suffix + ".*, and copies of one image could be in training and validation both: keep "
                      "one of them, or rename the other with its own mask");
  }

  std::vector<ImagePair> pairs;
  std::vector<std::string> missing;
  // Missing ones whose mask folder holds a file of the image's own stem (not counted when the folders are
  // one: each image would find itself).
  size_t same_name = 0;
  // Missing ones whose own name ends with the mask suffix: the folders may be swapped.
  size_t suffixed = 0;
  const bool one_folder = fs::equivalent(o.images_dir, o.masks_dir, ec);
  for (const auto& name : images) {
    std::string stem = fs::path(name).stem().string();
    auto it = mask_by_stem.find(stem + o.mask_suffix);
    if (it == mask_by_stem.end()) {
      same_name += !one_folder && !o.mask_suffix.empty() && mask_by_stem.count(stem);
      suffixed += ends_with_suffix(stem, o.mask_suffix);
      missing.push_back(name + " (expected " +
                        (fs::path(o.masks_dir) / (stem + o.mask_suffix + fs::path(name).extension().string())).string() +
                        ")");
      continue;
    }
    pairs.push_back({(fs::path(o.images_dir) / name).string(), (fs::path(o.masks_dir) / it->second).string()});
  }
  if (!missing.empty()) {
    std::string what = std::to_string(missing.size()) + " of " + std::to_string(images.size()) +
                       " images have no mask in '" + o.masks_dir + "' (the mask of <stem>.<ext> is <stem>" +
                       o.mask_suffix + " with any of the extensions " + exts + "):" +
                       list_up_to_10(missing);
    if (same_name > 0)  // masks named as their images, with the default suffix _mask
      what += " (" + std::to_string(same_name) + " of them have a file of their own name in the mask folder: if the "
              "masks are named as their images, set data.mask_suffix: \"\")";
    if (suffixed == missing.size())  // the images option given the mask folder
      what += " (every one of them is named like a mask, <stem>" + o.mask_suffix + ": are data." + o.key_prefix +
              "images and data." + o.key_prefix + "masks swapped?)";
    if (!o.skip_bad_files)
      throw UserError(prefix(o) + section(o) + ": " + what + ". Add the masks, fix data." + o.key_prefix +
                      "masks / data.mask_suffix, or set data.skip_bad_files: true to " + use(o) +
                      " without these images");
    spdlog::warn("{}{}: {}. Skipping these images (data.skip_bad_files is true)", prefix(o), section(o), what);
  }
  if (pairs.empty())
    throw UserError(prefix(o) + section(o) + ": no image in '" + o.images_dir + "' has a mask in '" +
                    o.masks_dir + "'; check data." + o.key_prefix + "masks and data.mask_suffix ('" + o.mask_suffix +
                    "')");
  return pairs;
}

namespace {

/// counts[c] += the pixels of class c in mask (a held sample: data/held_samples.h).
void count_classes(const cv::Mat& mask, int classes, std::vector<size_t>& counts, std::vector<float>& buffer) {
  buffer.resize(mask.total());
  held_mask_to_float(mask, buffer.data());
  for (float v : buffer)
    if (const int c = class_index(v, classes); c >= 0) ++counts[size_t(c)];
}

}  // namespace

std::vector<size_t> class_pixel_counts(const Tensor& masks, int classes) {
  std::vector<size_t> counts(size_t(std::max(classes, 0)), 0);
  std::vector<float> m;
  for (int i = 0; i < masks.shape().n; ++i) count_classes(held_sample(masks, i), classes, counts, m);
  return counts;
}

std::vector<size_t> class_pixel_counts(const Dataset& data, int classes) {
  if (!data.native()) return class_pixel_counts(data.masks, classes);
  std::vector<size_t> counts(size_t(std::max(classes, 0)), 0);
  std::vector<float> m;
  for (const cv::Mat& mask : data.native_masks) count_classes(mask, classes, counts, m);
  return counts;
}

namespace {

void check_options(const DataOptions& o) {
  if (o.height <= 0 || o.width <= 0 || (o.channels != 1 && o.channels != 3) || o.classes == 1 || o.classes < 0)
    throw InternalError("load_dataset: height and width must be > 0, channels 1 or 3 and classes 0 or >= 2");
}

}  // namespace

void PairCheck::add(const PairCheck& other) {
  errors.insert(other.errors.begin(), other.errors.end());
  low_masks += other.low_masks;
  thresholded += other.thresholded;
  label_like += other.label_like;
  keep_first(first_label_like, other.first_label_like);
  images16 += other.images16;
  multi_page += other.multi_page;
  keep_first(first_multi_page, other.first_multi_page);
  highest16 = std::max(highest16, other.highest16);
  empty_masks += other.empty_masks;
  upscaled += other.upscaled;
  keep_first(first_upscaled, other.first_upscaled);
  if (class_pixels.size() < other.class_pixels.size()) class_pixels.resize(other.class_pixels.size(), 0);
  for (size_t c = 0; c < other.class_pixels.size(); ++c) class_pixels[c] += other.class_pixels[c];
}

namespace {

/// The progress lines of a long load: "<verb> k/n images" at each tenth of n once 2 s have passed since the
/// start, in order, and the last one when one came before. Nothing when verb is "".
class LoadProgress {
 public:
  LoadProgress(const std::string& verb, int n) : verb_(verb), n_(n), start_(std::chrono::steady_clock::now()) {}
  /// Called by any thread once it has decoded a pair.
  void done_one() {
    const int d = ++done_;
    if (verb_.empty() || (d != n_ && d * 10 / n_ == (d - 1) * 10 / n_)) return;
    const bool late = std::chrono::steady_clock::now() - start_ >= std::chrono::seconds(2);
    std::lock_guard<std::mutex> lock(mu_);
    if (d <= printed_ || (d == n_ ? printed_ == 0 : !late)) return;
    printed_ = d;
    spdlog::info("{} {}/{} images", verb_, d, n_);
  }

 private:
  const std::string& verb_;
  const int n_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<int> done_{0};
  std::mutex mu_;
  int printed_ = 0;  ///< The count of the last line.
};

/// Copies decoded pixels into sample k of held images (U8 or U16); false,
/// copying nothing, for 16-bit pixels while the images hold U8.
bool hold_image(const cv::Mat& pixels, Tensor& images, int k) {
  const Shape s = images.shape();
  const bool held16 = images.dtype() == DType::U16;
  if (pixels.depth() == CV_16U && !held16) return false;
  cv::Mat to(s.h, s.w, held16 ? CV_16UC(s.c) : CV_8UC(s.c), images.raw_sample(k));
  if (pixels.depth() == to.depth()) pixels.copyTo(to);
  else pixels.convertTo(to, CV_16U, 257);  // 255 -> 65535: the same value on held_pixels_to_float's scale
  return true;
}

/// Images held as U8 become U16, each 8-bit sample widened by 257, and take
/// the 16-bit samples of wide (by sample index).
void widen_images(Tensor& images, const std::map<int, cv::Mat>& wide) {
  const Shape s = images.shape();
  Tensor u16;
  u16.set_dtype(DType::U16);
  u16.resize(s);
  for (int i = 0; i < s.n; ++i) {
    cv::Mat to(s.h, s.w, CV_16UC(s.c), u16.raw_sample(i));
    if (const auto it = wide.find(i); it != wide.end()) it->second.copyTo(to);
    else cv::Mat(s.h, s.w, CV_8UC(s.c), images.raw_sample(i)).convertTo(to, CV_16U, 257);
  }
  images = std::move(u16);
}

/// Decodes pair p's mask at `to` into out [to.height, to.width] as float32
/// (0/1, or class indices and kIgnoredPixel) and, with survey, counts its kind
/// in mine. UserError when the mask's own size is not its image's (`image`)
/// or as decode_mask.
void decode_pair_mask(const ImagePair& p, const DataOptions& o, cv::Size image, cv::Size to, bool survey, float* out,
                      PairCheck& mine) {
  MaskValues values = MaskValues::kEmpty;
  const cv::Size mask = o.classes > 0 ? decode_class_mask(p.mask, to.height, to.width, o.classes, out, o.ignore_class)
                                      : decode_mask(p.mask, to.height, to.width, out, survey ? &values : nullptr);
  if (mask != image)
    throw UserError("mask '" + p.mask + "' is " + std::to_string(mask.width) + "x" + std::to_string(mask.height) +
                    " but image '" + p.image + "' is " + std::to_string(image.width) + "x" +
                    std::to_string(image.height) + " (width x height); a mask must have its image's size");
  mine.low_masks += values == MaskValues::kAnyNonzero;
  mine.thresholded += values == MaskValues::kThresholded || values == MaskValues::kLabelLike;
  if (values == MaskValues::kLabelLike) ++mine.label_like, keep_first(mine.first_label_like, p.mask);
  mine.empty_masks += o.classes == 0 && values == MaskValues::kEmpty;
}

/// The size pairs are held at: o's, or (native_scale) the file's own size times the scale, at least 1x1.
cv::Size held_size(const DataOptions& o, cv::Size file) {
  return o.native_scale > 0 ? scaled_size(file, o.native_scale) : cv::Size(o.width, o.height);
}

/// Native images held as 8-bit become 16-bit (times 257) when any of them is: one scale for them all.
void widen_native(std::vector<cv::Mat>& images) {
  const bool any16 = std::any_of(images.begin(), images.end(), [](const cv::Mat& m) { return m.depth() == CV_16U; });
  for (cv::Mat& m : images)
    if (any16 && m.depth() == CV_8U) m.convertTo(m, CV_16U, 257);
}

/// What decode_into's threads share.
struct DecodeJob {
  const DataOptions& o;
  Dataset* into;                ///< nullptr: a check.
  bool survey;                  ///< Count the files' kinds (masks, 16-bit ranges, TIFF pages).
  std::mutex& mutex;            ///< Guards wide.
  std::map<int, cv::Mat>& wide; ///< 16-bit samples while the images tensor holds U8.
};

/// Decodes pair p into sample k of job.into (as decode_into says), counting what it finds in mine; mask_to is
/// the thread's buffer. Throws UserError for a file that cannot be used.
void decode_one(const DecodeJob& job, const ImagePair& p, int k, PairCheck& mine, std::vector<float>& mask_to) {
  const DataOptions& o = job.o;
  const bool native = o.native_scale > 0;
  double highest = -1;  // looked at when checking or loading, not per step
  // Native: decoded at the file's size, then scaled; else resized to o's size as it is decoded.
  DecodedImage decoded = decode_image_pixels(p.image, native ? 0 : o.height, native ? 0 : o.width, o.channels,
                                             job.survey ? &highest : nullptr);
  const cv::Size size = held_size(o, decoded.native);
  if (!native && (decoded.native.width * 4 < size.width || decoded.native.height * 4 < size.height))
    ++mine.upscaled, keep_first(mine.first_upscaled, p.image);
  if (decoded.pixels.size() != size) cv::resize(decoded.pixels, decoded.pixels, size, 0, 0, cv::INTER_AREA);
  if (native && job.into) job.into->native_images[size_t(k)] = decoded.pixels;
  if (!native && job.into && !hold_image(decoded.pixels, job.into->images, k)) {
    std::lock_guard<std::mutex> lock(job.mutex);
    job.wide[k] = decoded.pixels;
  }
  mine.images16 += highest >= 0;
  mine.highest16 = std::max(mine.highest16, highest);
  if (job.survey && tiff_pages(p.image) > 1) ++mine.multi_page, keep_first(mine.first_multi_page, p.image);
  mask_to.resize(size_t(size.area()));
  decode_pair_mask(p, o, decoded.native, size, job.survey, mask_to.data(), mine);
  if (native && job.into) {
    cv::Mat& m = job.into->native_masks[size_t(k)];
    m.create(size, mask_storage(o.classes) == DType::U8 ? CV_8UC1 : CV_16UC1);
    store_mask(mask_to.data(), m);
  } else if (job.into) {
    store_mask_sample(mask_to.data(), job.into->masks, k);
  }
  for (size_t j = 0; !mine.class_pixels.empty() && j < mask_to.size(); ++j)
    if (const int c = class_index(mask_to[j], o.classes); c >= 0) ++mine.class_pixels[size_t(c)];
}

// Decodes pairs[which[k]] on o.threads threads into sample k of `into` when given (its images and masks
// [K, H, W, C] of U8 or U16 and [K, H, W, 1] of mask_storage, K = which.size(), images held U8 becoming U16 when
// a 16-bit file comes; with o.native_scale its native_images and native_masks, K of them), else into nothing
// (a check, which also counts class pixels). What it finds goes into `found`. `verb`
// ("loading", "checking"): the progress lines (LoadProgress) and the survey of the files (masks' kinds, 16-bit
// ranges, TIFF pages); "": neither, only the errors (each step's decoding under MPI). Errors other than a
// UserError (out of memory) are rethrown after the threads join.
void decode_into(const std::vector<ImagePair>& pairs, const std::vector<int>& which, const DataOptions& o,
                 Dataset* into, PairCheck& found, const std::string& verb) {
  const bool native = o.native_scale > 0;
  const int n = int(which.size());
  if (o.classes > 0) found.class_pixels.resize(size_t(o.classes), 0);
  if (n == 0) return;
  int threads = o.threads > 0 ? o.threads : int(std::thread::hardware_concurrency());
  threads = std::clamp(threads, 1, n);
  if (!verb.empty())
    spdlog::info("{} {} image/mask pairs from '{}' on {} thread{}", verb, n, o.images_dir, threads,
                 threads > 1 ? "s" : "");
  std::atomic<int> next{0};
  LoadProgress progress(verb, n);
  std::mutex mutex;  // guards found and failure
  std::exception_ptr failure;
  std::map<int, cv::Mat> wide;  // 16-bit samples while images hold U8 (guarded by mutex)
  const DecodeJob job{o, into, !verb.empty(), mutex, wide};
  auto work = [&] {
    std::vector<float> mask_to;
    PairCheck mine;  // this thread's; class pixels only in a check
    mine.class_pixels.assign(into ? 0 : found.class_pixels.size(), 0);
    for (int k = next++; k < n; k = next++) {
      const ImagePair& p = pairs[size_t(which[size_t(k)])];
      try {
        decode_one(job, p, k, mine, mask_to);
      } catch (const UserError& e) {
        mine.errors[which[size_t(k)]] = e.what();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
      }
      progress.done_one();
    }
    std::lock_guard<std::mutex> lock(mutex);
    found.add(mine);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  if (!wide.empty()) widen_images(into->images, wide);
  if (native && into) widen_native(into->native_images);
}

// Throws UserError listing the pairs that failed (found.errors) among n, with the fix; with
// o.skip_bad_files, warns instead, and throws only when none is left.
void report_bad_pairs(const PairCheck& found, int n, const DataOptions& o) {
  std::vector<std::string> bad;
  for (const auto& [index, e] : found.errors) bad.push_back(e);
  if (bad.empty()) return;
  // A fix the reasons share (their common tail from a "; " or a ", but ") is said once, after the list.
  std::string shared;
  if (bad.size() > 1) {
    size_t common = 0;
    const std::string& first = bad.front();
    for (;; ++common) {
      bool same = common < first.size();
      for (const auto& b : bad)
        same = same && common < b.size() && b[b.size() - 1 - common] == first[first.size() - 1 - common];
      if (!same) break;
    }
    const size_t tail = first.size() - common;
    const size_t semicolon = first.find("; ", tail), but = first.find(", but ", tail);
    const size_t from = std::min(semicolon, but);
    if (from != std::string::npos) {
      shared = first.substr(from + (from == but ? 6 : 2));
      const size_t cut = first.size() - from;  // before `first` (bad's front) is cut too
      for (auto& b : bad) b.resize(b.size() - cut);
    }
  }
  std::string what = std::to_string(bad.size()) + " of " + std::to_string(n) +
                     " image/mask pairs cannot be used:" + list_up_to_10(bad) +
                     (shared.empty() ? "" : ". For each: " + shared);
  if (!o.skip_bad_files)
    throw UserError(prefix(o) + section(o) + ": " + what +
                    (int(bad.size()) == n ? ". Replace or fix these files (none can be used)"
                                          : ". Replace or remove these files, or set data.skip_bad_files: true to " +
                                                use(o) + " without them"));
  spdlog::warn("{}{}: {}. Skipping these pairs (data.skip_bad_files is true)", prefix(o), section(o), what);
  if (int(bad.size()) == n) throw UserError(prefix(o) + section(o) + ": no usable image/mask pair is left");
}

}  // namespace

PairCheck check_pairs(const std::vector<ImagePair>& pairs, const std::vector<int>& which, const DataOptions& o) {
  check_options(o);
  PairCheck found;
  decode_into(pairs, which, o, nullptr, found, "checking");
  return found;
}

std::vector<int> usable_pairs(const PairCheck& found, int n, const DataOptions& o) {
  if (found.low_masks > 0 && found.thresholded > 0)
    spdlog::warn("{} of {} masks hold no value above half their type's maximum and are read as 0/1 masks or label "
                 "images (every pixel > 0 is foreground), and {} are thresholded at half their maximum: "
                 "check that the mask folder holds one kind of mask (docs/data.md)",
                 found.low_masks, n, found.thresholded);
  else if (found.low_masks > 0)
    spdlog::info("{} of {} masks hold no value above half their type's maximum (0/1 masks or label images): "
                 "every pixel > 0 is foreground in them (docs/data.md)",
                 found.low_masks, n);
  // 12-bit camera data in 16-bit files reaches 16 of 255, and a model trained on full-range images predicts
  // nothing on them.
  if (found.images16 > 0 && found.highest16 > 0 && found.highest16 < 16384) {
    const int bits = int(std::ceil(std::log2(found.highest16 + 1)));  // the fewest that hold the largest value
    const double full = std::ldexp(1.0, bits) - 1;
    spdlog::warn("{}{}: the {} 16-bit image(s) hold values up to {:g} of 65535 ({}-bit data?): read as value x 255 / "
                 "65535 they reach only {:.1f} of 255. For inputs in [0, 1] over a {}-bit range, give the model's "
                 "Rescaling layer scale {:.6g} (= 65535 / (255 x {:g})) instead of 1/255, if every image of the "
                 "data is such a 16-bit file (docs/data.md)",
                 prefix(o), section(o), found.images16, found.highest16, bits, found.highest16 * 255 / 65535, bits,
                 65535 / (255 * full), full);
  }
  // A DAPI + membrane hyperstack would train on its first page alone, silently.
  if (found.multi_page > 0)
    spdlog::warn("{}{}: {} image(s) (the first: '{}') are TIFFs of several pages (a z-stack, or channels saved as "
                 "pages): only their first page is read; save the plane or channels to train on as one image "
                 "(docs/data.md)",
                 prefix(o), section(o), found.multi_page, found.first_multi_page);
  // An 8-bit label image (a value per nucleus) loses the nuclei labelled above half the maximum.
  if (found.label_like > 0)
    spdlog::warn("{} of {} masks (the first: '{}') hold areas of one value at or below half their type's maximum "
                 "beside values above it: label images (1..N, one value per object) of more labels than that? Their "
                 "objects labelled at or below it (1..127 in 8-bit) are read as background; save label images "
                 "16-bit, or as masks of 0 and 255 (docs/data.md)",
                 found.label_like, n, found.first_label_like);
  if (found.upscaled > 0)
    spdlog::warn("{} of {} images (the first: '{}') are less than a quarter of the input's {}x{} wide or high and are "
                 "enlarged more than 4 times to it, which invents the detail the model learns from: check the files, "
                 "or give the model an input nearer their size",
                 found.upscaled, n, found.first_upscaled, o.width, o.height);
  report_bad_pairs(found, n, o);
  std::vector<int> kept;
  for (int i = 0; i < n; ++i)
    if (!found.errors.count(i)) kept.push_back(i);
  // Masks that all decode to nothing teach background alone, while the metrics read as perfect.
  if (o.classes == 0 && !kept.empty() && found.empty_masks == int(kept.size()))
    spdlog::warn("{}{}: every one of the {} masks in '{}' is empty (no pixel above 0), so the model can only learn "
                 "background; once it predicts none, dice and mean_iou read 1 (an empty prediction of an empty mask "
                 "is perfect) though it has learnt nothing of the objects: check that the folder and mask_suffix "
                 "name the masks, and that they mark the objects with values above 0 (docs/data.md)",
                 prefix(o), section(o), kept.size(), o.masks_dir);
  return kept;
}

namespace {

/// The file names (no folder) of pairs[which[k]]'s images.
std::vector<std::string> image_names(const std::vector<ImagePair>& pairs, const std::vector<int>& which) {
  std::vector<std::string> names;
  for (int i : which) names.push_back(fs::path(pairs[size_t(i)].image).filename().string());
  return names;
}

/// Room for n samples of o's size in ds: images as U16 when `first` (the
/// first pair's image, "" for none) is 16-bit, else U8 (decode_into widens
/// them when a later file is 16-bit), so that a 16-bit dataset is not held
/// twice on its way in; masks as mask_storage(o.classes).
void hold(Dataset& ds, int n, const DataOptions& o, const std::string& first) {
  if (o.native_scale > 0) {  // each sample its own Mat, made as it is decoded
    ds.native_images.assign(size_t(n), cv::Mat());
    ds.native_masks.assign(size_t(n), cv::Mat());
    return;
  }
  bool sixteen = false;
  try {
    sixteen = !first.empty() && read_image_file(first).depth() == CV_16U;
  } catch (const UserError&) {  // decode_into reports the file
  }
  ds.images.set_dtype(sixteen ? DType::U16 : DType::U8);
  ds.images.resize(Shape{n, o.height, o.width, o.channels});
  ds.masks.set_dtype(mask_storage(o.classes));
  ds.masks.resize(Shape{n, o.height, o.width, 1});
}

}  // namespace

void decode_pairs(const std::vector<ImagePair>& pairs, const std::vector<int>& which, const DataOptions& o,
                  Dataset& ds) {
  check_options(o);
  ds.names = image_names(pairs, which);
  hold(ds, int(which.size()), o, which.empty() ? "" : pairs[size_t(which[0])].image);
  PairCheck found;
  decode_into(pairs, which, o, &ds, found, "");
  if (!found.errors.empty()) {
    std::string why;
    for (const auto& [index, e] : found.errors) why += (why.empty() ? "" : "; ") + e;
    throw UserError(prefix(o) + section(o) + ": " + why);
  }
}

Dataset load_dataset(const DataOptions& o) {
  return load_dataset(o, find_image_pairs(o));
}

Dataset load_dataset(const DataOptions& o, const std::vector<ImagePair>& pairs) {
  check_options(o);
  Dataset ds;
  const int n = int(pairs.size());
  std::vector<int> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  ds.names = image_names(pairs, all);
  hold(ds, n, o, pairs.empty() ? "" : pairs[0].image);
  PairCheck found;
  decode_into(pairs, all, o, &ds, found, "loading");
  const std::vector<int> kept = usable_pairs(found, n, o);
  if (int(kept.size()) == n) return ds;
  // Drop the bad pairs, keeping order; the tensors shrink in place.
  std::vector<std::string> names;
  for (size_t k = 0; k < kept.size(); ++k) {
    const int i = kept[k];
    if (ds.native()) {
      ds.native_images[k] = ds.native_images[size_t(i)];
      ds.native_masks[k] = ds.native_masks[size_t(i)];
    } else if (int(k) != i) {
      std::memcpy(ds.images.raw_sample(int(k)), ds.images.raw_sample(i), ds.images.sample_bytes());
      std::memcpy(ds.masks.raw_sample(int(k)), ds.masks.raw_sample(i), ds.masks.sample_bytes());
    }
    names.push_back(ds.names[size_t(i)]);
  }
  ds.names.swap(names);
  if (ds.native()) {
    ds.native_images.resize(kept.size());
    ds.native_masks.resize(kept.size());
    return ds;
  }
  ds.images.resize(ds.images.shape().with_batch(int(kept.size())));
  ds.masks.resize(ds.masks.shape().with_batch(int(kept.size())));
  return ds;
}

}  // namespace trainer
