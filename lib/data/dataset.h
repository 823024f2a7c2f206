#pragma once
// Image/mask pairs from two folders, decoded with OpenCV, resized and held in
// memory as float tensors. See docs/data.md for the matching and binarisation rules.
#include <opencv2/core.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/class_mask.h"
#include "core/tensor.h"

namespace trainer {

struct DataOptions {
  std::string images_dir;            ///< Folder of images.
  std::string masks_dir;             ///< Folder of masks.
  std::string mask_suffix = "_mask"; ///< Image <stem>.<ext> pairs with mask <stem><suffix>.<ext2>.
  int height = 0, width = 0;         ///< Size every image and mask is resized to (pixels).
  /// > 0: each pair is kept at its own size times this factor (INTER_AREA,
  /// resize_mask; at least 1x1) in Dataset::native_images / native_masks
  /// instead, for crops (data.crop); height and width are then the crops'.
  double native_scale = 0;
  int channels = 3;                  ///< 1 (gray) or 3 (RGB); alpha is dropped.
  /// 0: binary masks (decode_mask); K >= 2: class-index masks of K classes
  /// (decode_class_mask), for a categorical loss.
  int classes = 0;
  /// With classes: the mask value whose pixels are read as kIgnoredPixel
  /// (the loss's ignore_class, 0..65535); -1: none.
  int ignore_class = -1;
  bool skip_bad_files = false;       ///< Warn and skip instead of failing on bad/missing files.
  int threads = 0;                   ///< Decoder threads; 0: hardware concurrency.
  std::string config_path;           ///< For messages: the config that named these folders.
  /// For messages: "" names the folders data.images / data.masks,
  /// "validation_" data.validation_images / data.validation_masks.
  std::string key_prefix;
};

struct Dataset {
  std::vector<std::string> names;    ///< Image file names (no folder), sorted; names[i] is sample i.
  /// [N, H, W, C], RGB order, held as data/held_samples.h says (U8, U16 for
  /// 16-bit files; F32 in [0, 255] when made in memory); image_sample_to_float
  /// reads a sample as float32 in [0, 255].
  Tensor images;
  /// [N, H, W, 1]: 0 or 1, or class indices 0..K-1 and ignored pixels, held as
  /// mask_storage(K) (F32 when made in memory); mask_sample_to_float reads one.
  Tensor masks;
  /// Loaded with DataOptions::native_scale (images and masks then empty):
  /// sample i at its own size times the scale, held as above: images
  /// CV_8UC(C) (CV_16UC(C) when any file is 16-bit, the 8-bit ones widened
  /// by 257), masks CV_8UC1 or CV_16UC1 (mask_storage) of the same size.
  std::vector<cv::Mat> native_images, native_masks;
  int size() const { return int(names.size()); }
  /// Whether the samples are held at their own sizes (native_images).
  bool native() const { return !native_images.empty(); }
};

/// Pixels of each class 0..classes-1 in class-index masks [N, H, W, 1]
/// (ignored pixels and other values counted nowhere).
std::vector<size_t> class_pixel_counts(const Tensor& masks, int classes);
/// class_pixel_counts of data's masks, held as tensors or at their own sizes.
std::vector<size_t> class_pixel_counts(const Dataset& data, int classes);

/// An image file and its mask file: the folder joined with the file name.
struct ImagePair {
  std::string image, mask;
};

/// The image/mask pairs load_dataset loads, in image-name order, matched by
/// the rules of docs/data.md; nothing is decoded. Throws UserError as
/// load_dataset does for missing folders, no images and missing masks
/// (unless skip_bad_files, which warns and drops the image).
std::vector<ImagePair> find_image_pairs(const DataOptions& options);

/// Finds the pairs, decodes them on options.threads threads (printing a
/// progress line), resizes (INTER_AREA for images, resize_mask for masks)
/// and binarises masks (pixel > half the type's maximum -> 1), or with
/// options.classes reads them as class indices (decode_class_mask).
/// Throws UserError naming the folder/files and the fix when a folder is
/// missing or empty, a mask is missing, or a file cannot be decoded (unless
/// skip_bad_files, which warns and drops the pair; no pair left is an error).
Dataset load_dataset(const DataOptions& options);
/// load_dataset of the pairs find_image_pairs(options) found already (a
/// caller that planned for them: nothing is looked up twice, no warning given twice).
Dataset load_dataset(const DataOptions& options, const std::vector<ImagePair>& pairs);

/// first <- candidate when candidate is not "" and first is "" or after it in name order.
inline void keep_first(std::string& first, const std::string& candidate) {
  if (!candidate.empty() && (first.empty() || candidate < first)) first = candidate;
}

/// What decoding image/mask pairs found (check_pairs; load_dataset's own checks).
struct PairCheck {
  std::map<int, std::string> errors;  ///< Pair index -> why it cannot be used (a UserError's one-line message).
  int low_masks = 0;    ///< Binary masks with no value above half their type's maximum (0/1 masks, label images).
  int thresholded = 0;  ///< Binary masks thresholded at half their type's maximum.
  int label_like = 0;   ///< Of those, masks that look like 8-bit label images with labels above 127 (kLabelLike).
  std::string first_label_like;  ///< The first of them in name order ("" when none).
  int images16 = 0;        ///< 16-bit images.
  int multi_page = 0;      ///< Images that are TIFFs of several pages (tiff_pages), of which the first is read.
  std::string first_multi_page;  ///< The first of them in name order ("" when none).
  double highest16 = -1;   ///< The largest value of the 16-bit images (-1: none).
  int empty_masks = 0;  ///< Binary masks with no pixel above 0.
  int upscaled = 0;     ///< Images below a quarter of the held size's width or height (resized more than 4x up).
  std::string first_upscaled;  ///< The first of them in name order ("" when none).
  std::vector<size_t> class_pixels;  ///< options.classes >= 2: each class's pixels over the masks; else empty.

  /// Adds what other found (another decoder thread's share): errors, counts
  /// and class pixels summed, the largest 16-bit value, the first names.
  void add(const PairCheck& other);
};

/// Decodes pairs[which[k]] as load_dataset does, keeping nothing (each
/// decoder thread reuses one sample's memory), with progress lines
/// ("checking 12/60 images"): a process of a multi-process run checks its
/// share of the pairs so before training. Never throws for a bad file (it
/// is in the result's errors); InternalError for bad options.
PairCheck check_pairs(const std::vector<ImagePair>& pairs, const std::vector<int>& which, const DataOptions& options);

/// load_dataset's rules, given what decoding all n pairs found: logs its
/// notes on mask values, throws UserError listing the pairs that cannot be
/// used (with the fix) unless options.skip_bad_files, which warns (and
/// throws when none is left). Returns the usable pairs' indices 0..n-1, in order.
std::vector<int> usable_pairs(const PairCheck& found, int n, const DataOptions& options);

/// Sample k of `out` becomes pairs[which[k]] decoded as load_dataset decodes
/// (names: the image files' names), on options.threads threads, with no log
/// line; out's memory is reused when it holds enough. Throws UserError giving
/// each pair that cannot be decoded and why (options.skip_bad_files aside:
/// the caller chose these pairs).
void decode_pairs(const std::vector<ImagePair>& pairs, const std::vector<int>& which, const DataOptions& options,
                  Dataset& out);

}  // namespace trainer
