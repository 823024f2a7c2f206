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

EvalResult evaluate_images(Trainer& trainer, const EvalOptions& o) {
  check_threshold(o.threshold, "--threshold");
  if (o.batch_size < 1) throw UserError("--batch-size must be at least 1");
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
  const Shape input = trainer.model().input_shape();
  if (o.tta) log_tta(input);
  const size_t n = result.samples.size();
  size_t mask_like = 0;   // label images that look like binary masks
  size_t label_like = 0;  // masks that look like label images
  // Chunks of one global batch: the truth is decoded once and not all of it held at once.
  for (size_t lo = 0; lo < n; lo += size_t(o.batch_size)) {
    const size_t hi = std::min(n, lo + size_t(o.batch_size));
    const int k = int(hi - lo);
    Dataset chunk;
    chunk.images = Tensor(input.with_batch(k));
    chunk.masks = Tensor(Shape{k, input.h, input.w, 1});
    std::vector<cv::Mat> truths;
    std::vector<int> indices;
    for (int i = 0; i < k; ++i) {
      const EvalSample& s = result.samples[lo + size_t(i)];
      chunk.names.push_back(s.name);
      indices.push_back(i);
      const cv::Size size = decode_image(s.image, input.h, input.w, input.c, chunk.images.sample(i));
      if (classes > 0 && !boundary) {  // class-index masks, read as for training; no instances
        check_size(s, decode_class_mask(s.truth, input.h, input.w, classes, chunk.masks.sample(i),
                                                trainer.config().training.loss.ignore_class), size);
        continue;
      }
      bool labels = false;
      truths.push_back(load_truth(o, s, &labels));
      if (o.kind == TruthKind::kLabels && looks_like_mask(truths.back())) ++mask_like;
      label_like += labels;
      check_size(s, truths.back().size(), size);
      cv::Mat target, small;  // boundary classes 0/1/2, else the foreground 0/1, at the image's size
      if (boundary) {
        target = boundary_classes(truths.back(), o.boundary_width);  // labels and DSB folders load as CV_16UC1
      } else {
        target = (truths.back() != 0) / 255;
      }
      small = resize_mask(target, cv::Size(input.w, input.h));
      cv::Mat truth(input.h, input.w, CV_32FC1, chunk.masks.sample(i));
      small.convertTo(truth, CV_32F);
      // The class a boundary model was trained to ignore is left out here too, as decode_class_mask does.
      if (const int ignored = trainer.config().training.loss.ignore_class; boundary && ignored >= 0 && ignored < 3)
        truth.setTo(kIgnoredPixel, small == ignored);
    }
    Tensor probs;
    if (o.tta) {  // pixel metrics of the averaged probabilities too
      probs = predict_tta(trainer, chunk.images, o.batch_size);
      result.pixel.add(probability_stats(trainer, probs, chunk.masks));
    } else {
      result.pixel.add(trainer.evaluate(chunk, indices, o.batch_size));
      if (classes == 0 || boundary) probs = trainer.predict(chunk.images, o.batch_size);
    }
    for (int i = 0; (classes == 0 || boundary) && i < k; ++i) {
      const cv::Mat prob = probability_map(probs, i, truths[size_t(i)].size());
      const cv::Mat pred =
          boundary ? boundary_objects(class_map(prob)) : connected_objects(threshold_map(prob, o.threshold));
      result.scores.push_back(instance_score(truths[size_t(i)], pred));
      result.score += result.scores.back().score / double(n);
    }
    spdlog::info("evaluated {}/{} image(s)", hi, n);
  }
  if (label_like > 0)
    spdlog::warn("{} of {} mask(s) hold the values 1..N of label images: as masks, touching nuclei merge into one "
                 "object in the instance score; pass label images with --labels instead of --masks",
                 label_like, n);
  if (mask_like > 0)
    spdlog::warn("{} of {} label image(s) hold only 0 and one of 255 or 65535: binary masks? As labels all "
                 "nuclei of such an image are one object; pass binary masks with --masks, which splits them by "
                 "connectivity",
                 mask_like, n);
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
