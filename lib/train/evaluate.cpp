#include "train/evaluate.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "core/class_mask.h"
#include "core/ascii.h"
#include "core/error.h"
#include "data/boundary_classes.h"
#include "data/boundary_objects.h"
#include "data/dsb_layout.h"
#include "data/image_decode.h"
#include "data/image_files.h"
#include "data/mask_resize.h"
#include "io/atomic_file.h"
#include "train/predict.h"
#include "train/tiled_predict.h"
#include "train/tta.h"

namespace trainer {

namespace fs = std::filesystem;

namespace {

std::string size_str(cv::Size s) { return std::to_string(s.width) + "x" + std::to_string(s.height); }

/// Whether single-channel img holds a value between 0 and its maximum, which goes into highest: the 1..N of a
/// label image, not the one value of a binary mask.
bool holds_values_below_max(const cv::Mat& img, double& highest) {
  cv::minMaxLoc(img, nullptr, &highest);
  return cv::countNonZero((img > 0) & (img < highest)) > 0;
}

void check_size(const EvalSample& s, cv::Size truth, cv::Size image) {
  if (truth != image)
    throw UserError("truth '" + s.truth + "' is " + size_str(truth) + " but its image '" + s.image + "' is " +
                    size_str(image) + "; the truth must have its image's size");
}

}  // namespace

std::vector<EvalSample> find_eval_samples(const EvalOptions& o) {
  std::vector<EvalSample> samples;
  if (o.kind == TruthKind::kNative) {
    for (const auto& id : list_dsb_ids(o.truth_dir))
      samples.push_back({id, (fs::path(o.truth_dir) / id / "images" / (id + ".png")).string(), id});
    return samples;
  }
  std::error_code ec;
  if (!fs::is_directory(o.truth_dir, ec))
    throw UserError(o.flag + " '" + o.truth_dir + "' " +
                    (fs::exists(o.truth_dir, ec) ? "is a file, not a folder" : "does not exist") + "; fix the path");
  std::map<std::string, std::string> truth_by_stem;  // first in name order wins
  for (const auto& t : list_image_files(o.truth_dir, o.flag)) truth_by_stem.emplace(fs::path(t).stem().string(), t);
  std::vector<std::string> images = list_image_files(o.images_dir, "--images");
  // Images and their truth may share one folder, as for training: then the truth files are
  // not images.
  if (fs::equivalent(o.images_dir, o.truth_dir, ec)) {
    const std::string suffix_flag = o.kind == TruthKind::kMasks ? "--mask-suffix" : "--labels-suffix";
    if (o.suffix.empty())
      throw UserError(o.flag + " '" + o.truth_dir + "' is the images' folder and " + suffix_flag +
                      " is empty, so each image would be its own truth: give the truth's own folder, or the end "
                      "of a truth file's name in this one (" + suffix_flag + " _mask for a.png's a_mask.png)");
    images = without_masks(images, o.suffix);
  } else if (const std::vector<std::string> kept = without_masks(images, o.image_mask_suffix);
             kept.size() < images.size()) {
    // The training folder's masks beside their images, with truth elsewhere (--labels).
    spdlog::info("left out the {} mask(s) beside their images in '{}' (<stem>{}.*)", images.size() - kept.size(),
                 o.images_dir, o.image_mask_suffix);
    images = kept;
  }
  for (const auto& image : images) {
    const std::string stem = fs::path(image).stem().string();
    auto it = truth_by_stem.find(stem + o.suffix);
    if (it == truth_by_stem.end()) {
      // A folder of binary masks given as label images (the training masks, named <stem> or <stem>_mask).
      std::string masks;
      if (o.kind == TruthKind::kLabels)
        for (const std::string& s : {stem, stem + "_mask"})
          if (truth_by_stem.count(s)) masks = truth_by_stem.at(s);
      throw UserError("image '" + image + "' has no truth file '" + stem + o.suffix + ".png' (or .jpg, .tif...) in " +
                      o.flag + " folder '" + o.truth_dir + "'; add it, fix the suffix (--" +
                      (o.kind == TruthKind::kMasks ? "mask" : "labels") + "-suffix) or remove the image" +
                      (masks.empty() ? ""
                                     : " (it holds '" + fs::path(masks).filename().string() +
                                           "': binary masks? pass them with --masks instead of --labels)"));
    }
    samples.push_back({fs::path(image).filename().string(), image, it->second});
  }
  return samples;
}

cv::Mat load_truth(const EvalOptions& o, const EvalSample& s, bool* label_like) {
  if (o.kind == TruthKind::kNative) return dsb_label_map(o.truth_dir, s.truth);
  if (o.kind == TruthKind::kMasks) {
    // Read once: its values (label images?), then binarised at its own size.
    const cv::Mat raw = read_image_file(s.truth);
    // JPEG is lossy (a 0/1 mask comes back with 2s and 3s): never label images.
    const std::string ext = ascii_lower(fs::path(s.truth).extension().string());
    if (label_like && raw.channels() == 1 && ext != ".jpg" && ext != ".jpeg") {
      double highest = 0;
      const bool between = holds_values_below_max(raw, highest);
      *label_like = between && highest != 1 && highest != 255 && highest != 65535;
    }
    cv::Mat binary(raw.size(), CV_32FC1);
    binarize_mask(raw, s.truth, raw.rows, raw.cols, binary.ptr<float>());
    cv::Mat mask8;
    binary.convertTo(mask8, CV_8U);
    return connected_objects(mask8);
  }
  cv::Mat labels = read_label_image(s.truth);
  if (labels.depth() == CV_8U) labels.convertTo(labels, CV_16U);
  return labels;
}

namespace {

/// Whether a label image (16-bit) holds one value only besides 0, and that
/// value is the 8- or 16-bit maximum: a binary mask given as labels, which
/// would count all its nuclei as one object.
bool looks_like_mask(const cv::Mat& labels) {
  double highest = 0;
  const bool between = holds_values_below_max(labels, highest);
  return (highest == 255 || highest == 65535) && !between;
}

}  // namespace

namespace {

/// What evaluate_images counts for its warnings about the truth.
struct TruthNotes {
  size_t mask_like = 0;   ///< Label images that look like binary masks.
  size_t label_like = 0;  ///< Masks that look like label images.
};

/// A sample's instance truth and its pixel truth, both at the image's own size.
struct Truth {
  cv::Mat objects;  ///< load_truth's: 0 background, one value per object.
  cv::Mat target;   ///< boundary_classes' 0/1/2 for a boundary model, else the foreground 0/1.
};

Truth load_instance_truth(const EvalOptions& o, const EvalSample& s, bool boundary, TruthNotes& notes) {
  bool labels = false;
  Truth t{load_truth(o, s, &labels), {}};
  if (o.kind == TruthKind::kLabels && looks_like_mask(t.objects)) ++notes.mask_like;
  notes.label_like += labels;
  // Labels and DSB folders load as CV_16UC1.
  t.target = boundary ? boundary_classes(t.objects, o.boundary_width) : cv::Mat((t.objects != 0) / 255);
  return t;
}

/// out [target's H, W, 1] <- target as float pixel truth; the class a boundary model was trained to ignore
/// becomes kIgnoredPixel, as decode_class_mask reads it.
void store_target(const Trainer& trainer, const cv::Mat& target, bool boundary, float* out) {
  cv::Mat truth(target.size(), CV_32FC1, out);
  target.convertTo(truth, CV_32F);
  if (const int ignored = trainer.config().training.loss.ignore_class; boundary && ignored >= 0 && ignored < 3)
    truth.setTo(kIgnoredPixel, target == ignored);
}

/// The nuclei a prediction holds (predicted_instances): prob (CV_32FC(K) at the image's size) thresholded and
/// split by the watershed, or a boundary model's boundary_objects of its class map.
cv::Mat predicted_objects(const cv::Mat& prob, bool boundary, const EvalOptions& o) {
  return boundary ? predicted_instances(class_map(prob), 3)
                  : predicted_instances(threshold_map(prob, o.threshold), 0, o.split);
}

/// Evaluates samples [lo, hi) of r at the model's input size, as one global batch: the pixel metrics via
/// Trainer::evaluate (or, with TTA, of the averaged probabilities), the instance scores of the probabilities
/// resized back to each image's size.
void evaluate_resized(Trainer& trainer, const EvalOptions& o, size_t lo, size_t hi, bool boundary,
                      TruthNotes& notes, EvalResult& r) {
  const Shape input = trainer.model().input_shape();
  const int k = int(hi - lo), classes = trainer.classes();
  Dataset chunk;
  chunk.images = Tensor(input.with_batch(k));
  chunk.masks = Tensor(Shape{k, input.h, input.w, 1});
  std::vector<cv::Mat> truths;
  std::vector<int> indices;
  for (int i = 0; i < k; ++i) {
    const EvalSample& s = r.samples[lo + size_t(i)];
    chunk.names.push_back(s.name);
    indices.push_back(i);
    const cv::Size size = decode_image(s.image, input.h, input.w, input.c, chunk.images.sample(i));
    if (classes > 0 && !boundary) {  // class-index masks, read as for training; no instances
      check_size(s, decode_class_mask(s.truth, input.h, input.w, classes, chunk.masks.sample(i),
                                      trainer.config().training.loss.ignore_class), size);
      continue;
    }
    const Truth t = load_instance_truth(o, s, boundary, notes);
    check_size(s, t.objects.size(), size);
    truths.push_back(t.objects);
    store_target(trainer, resize_mask(t.target, cv::Size(input.w, input.h)), boundary, chunk.masks.sample(i));
  }
  Tensor probs;
  if (o.tta) {  // pixel metrics of the averaged probabilities too
    probs = predict_tta(trainer, chunk.images, o.batch_size);
    r.pixel.add(probability_stats(trainer, probs, chunk.masks));
  } else {
    r.pixel.add(trainer.evaluate(chunk, indices, o.batch_size));
    if (!truths.empty()) probs = trainer.predict(chunk.images, o.batch_size);
  }
  for (size_t i = 0; i < truths.size(); ++i)
    r.scores.push_back(
        instance_score(truths[i], predicted_objects(probability_map(probs, int(i), truths[i].size()), boundary, o)));
}

/// Evaluates sample s at its own size, predicted in tiles (predict_tiled): the pixel metrics of its
/// probabilities (probability_stats) against its truth at that size, and its instance score.
void evaluate_tiled(Trainer& trainer, const EvalOptions& o, const EvalSample& s, bool boundary, TruthNotes& notes,
                    EvalResult& r) {
  const int classes = trainer.classes();
  const cv::Mat pixels = decode_image_pixels(s.image, 0, 0, trainer.model().input_shape().c).pixels;
  const int h = pixels.rows, w = pixels.cols;
  Tensor masks(Shape{1, h, w, 1}), probs;
  cv::Mat objects;
  if (classes > 0 && !boundary) {
    check_size(s, decode_class_mask(s.truth, h, w, classes, masks.data(), trainer.config().training.loss.ignore_class),
               pixels.size());
  } else {
    const Truth t = load_instance_truth(o, s, boundary, notes);
    check_size(s, t.objects.size(), pixels.size());
    store_target(trainer, t.target, boundary, masks.data());
    objects = t.objects;
  }
  r.pixel.add(tiled_stats(trainer, pixels, masks, TiledPrediction{*o.tiles, o.batch_size, o.tta}, probs));
  const cv::Mat prob(h, w, CV_32FC(probs.shape().c), probs.data());
  if (!objects.empty()) r.scores.push_back(instance_score(objects, predicted_objects(prob, boundary, o)));
}

}  // namespace

EvalResult evaluate_images(Trainer& trainer, const EvalOptions& o) {
  check_threshold(o.threshold, "--threshold");
  if (o.batch_size < 1) throw UserError("--batch-size must be at least 1");
  if (o.tiles) check_tile_overlap(o.tiles->overlap, "--tile-overlap");
  const int classes = trainer.classes();
  // A boundary model scored against instances: its classes are labels_to_classes' (0, 1 interior, 2 boundary).
  const bool boundary = scores_boundary_instances(classes, o.kind);
  if (classes > 0 && o.kind != TruthKind::kMasks && !boundary)
    throw UserError(o.flag + " gives nucleus instances for the DSB 2018 instance score, which is for one-channel "
                    "(sigmoid) models and 3-class boundary models (labels_to_classes); this model has " +
                    std::to_string(classes) + " classes: evaluate it with --masks DIR (class-index masks, as for "
                    "training)");
  if (boundary)  // the checkpoint cannot say what its classes mean
    spdlog::info("3 classes against {}: taken as labels_to_classes' 0 background, 1 interior, 2 boundary (truth "
                 "classes at boundary width {}); nuclei are the interior's components grown into the boundary",
                 o.flag, o.boundary_width);
  EvalResult result;
  result.pixel = trainer.empty_stats();
  result.samples = find_eval_samples(o);
  if (o.tta) log_tta(trainer.model().input_shape());
  if (o.tiles) log_tiles(trainer.model().input_shape(), *o.tiles);
  const size_t n = result.samples.size();
  TruthNotes notes;
  // Chunks of one global batch (one image in tiles): the truth is decoded once and not all of it held at once.
  const size_t chunk = o.tiles ? 1 : size_t(o.batch_size);
  for (size_t lo = 0; lo < n; lo += chunk) {
    const size_t hi = std::min(n, lo + chunk);
    if (o.tiles)
      evaluate_tiled(trainer, o, result.samples[lo], boundary, notes, result);
    else
      evaluate_resized(trainer, o, lo, hi, boundary, notes, result);
    spdlog::info("evaluated {}/{} image(s)", hi, n);
  }
  for (const InstanceScore& s : result.scores) result.score += s.score / double(n);
  if (notes.label_like > 0)
    spdlog::warn("{} of {} mask(s) hold the values 1..N of label images: as masks, touching nuclei merge into one "
                 "object in the instance score; pass label images with --labels instead of --masks",
                 notes.label_like, n);
  if (notes.mask_like > 0)
    spdlog::warn("{} of {} label image(s) hold only 0 and one of 255 or 65535: binary masks? As labels all "
                 "nuclei of such an image are one object; pass binary masks with --masks, which splits them by "
                 "connectivity",
                 notes.mask_like, n);
  return result;
}

namespace {

/// s as one CSV field (RFC 4180): in double quotes, each " doubled, when it holds a comma, a quote or a line
/// break (an image named "well A1, field 2.png"); else as it is.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

void write_scores_csv(const EvalResult& r, const std::string& path) {
  std::ostringstream csv;
  csv.precision(6);
  csv << kScoresCsvHeader << '\n';
  for (size_t i = 0; i < r.samples.size(); ++i) {
    const InstanceScore& s = r.scores[i];
    csv << csv_field(r.samples[i].name) << ',' << s.n_true << ',' << s.n_pred << ',' << s.score << ',' << s.precision[0] << ','
        << s.precision[5] << '\n';
  }
  write_file_atomic(path, csv.str());
}

}  // namespace trainer
