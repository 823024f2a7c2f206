#pragma once
// Evaluation of a trained model on images with ground truth: the pixel
// metrics of training (loss, mean_iou, dice, accuracy at the model's input
// size) and the 2018 Data Science Bowl instance score at each image's own size.
#include <optional>
#include <string>
#include <vector>

#include "data/instances.h"
#include "data/tiling.h"

#include "train/instance_metrics.h"
#include "train/trainer.h"

namespace trainer {

/// Where the ground truth comes from.
enum class TruthKind {
  kMasks,   ///< Binary masks <stem><suffix>.<ext> in truth_dir (as for training); objects = 8-connected
            ///< components, so touching nuclei count as one.
  kLabels,  ///< Label images <stem><suffix>.<ext> in truth_dir (8- or 16-bit, 0 background, 1..N).
  kNative,  ///< DSB 2018 folders truth_dir/<id>/images/<id>.png and <id>/masks/*.png (images_dir unused).
};

struct EvalOptions {
  TruthKind kind = TruthKind::kLabels;
  std::string images_dir;  ///< Folder of images (kMasks, kLabels).
  std::string truth_dir;   ///< Folder of masks, label images or DSB id folders.
  std::string suffix;      ///< File name suffix of masks or label images.
  std::string flag;        ///< The flag that named truth_dir, for messages ("--labels").
  double threshold = 0.5;  ///< Predicted foreground = probability > threshold; in (0, 1).
  int batch_size = 1;      ///< Images per global batch, split over the towers.
  bool tta = false;        ///< Average over the input's symmetries (train/tta.h).
  /// Predict each image at its own size in tiles (train/tiled_predict.h,
  /// batch_size tiles per batch) and take the pixel metrics there, instead
  /// of at the model's input size.
  std::optional<TileOptions> tiles;
  InstanceSplit split;  ///< How a one-channel model's touching nuclei are split (predicted_instances).
  /// A boundary model's (3 classes) pixel truth from instance truth:
  /// boundary_classes at this width, as labels_to_classes --boundary-width.
  int boundary_width = 2;
  /// The suffix of training masks that may lie beside the images
  /// (data.mask_suffix): with truth in another folder, the images' folder's
  /// <stem><image_mask_suffix> files of another image are left out, not
  /// scored as images ("": none).
  std::string image_mask_suffix;
};

/// Whether a model of `classes` classes (0: one sigmoid channel) against
/// truth of `kind` is scored as a boundary model: 3 classes (labels_to_classes'
/// background, interior, boundary) against instance truth (kLabels, kNative).
inline bool scores_boundary_instances(int classes, TruthKind kind) {
  return classes == 3 && kind != TruthKind::kMasks;
}

/// One image and where its truth is.
struct EvalSample {
  std::string name;   ///< Image file name (kNative: the id).
  std::string image;  ///< Image path.
  std::string truth;  ///< Mask or label image path (kNative: the id).
};

struct EvalResult {
  BatchStats pixel;                   ///< Loss and metric counts at the model's input size.
  std::vector<EvalSample> samples;    ///< In evaluation order (sorted by name).
  std::vector<InstanceScore> scores;  ///< scores[i] belongs to samples[i].
  double score = 0;                   ///< Mean of scores[i].score over the images.
};

/// The images of options and their truth files. Throws UserError naming the
/// folder or file and the fix for a missing folder, a folder without images
/// and an image without its truth file.
std::vector<EvalSample> find_eval_samples(const EvalOptions& options);

/// The objects of a sample's truth at the image's own size: CV_16UC1 or
/// CV_32SC1 [H, W], 0 background. Throws UserError naming the file when it
/// cannot be decoded or is not a single-channel 8- or 16-bit label image.
/// label_like (when given) is set, for --masks, to whether the mask (not a
/// JPEG, whose compression adds values) holds two or more values between 0
/// and a maximum that is neither 1, 255 nor 65535: the 1..N of a label image, whose touching nuclei would merge as a
/// mask's connected objects.
cv::Mat load_truth(const EvalOptions& options, const EvalSample& sample, bool* label_like = nullptr);

/// A categorical model (trainer.classes() = K) takes class-index masks
/// (kMasks, read with decode_class_mask at the model's input size) and gets
/// the pixel metrics alone: no instance score (scores stays empty, score 0).
/// A boundary model (K = 3, labels_to_classes' background, interior,
/// boundary) also takes instance truth (kLabels, kNative): its pixel truth
/// is boundary_classes(truth, boundary_width) resized with resize_mask,
/// and its predicted objects are boundary_objects of the class map of its
/// probabilities resized to the image's own size (predict's _mask.png).
/// Evaluates trainer on every sample: the pixel metrics via Trainer::evaluate
/// on the images and binary truth (object > 0; a boundary model's classes,
/// above, its ignore_class left out) resized to the model's input
/// (INTER_AREA and resize_mask, as the data loader does), then the instance
/// score per image: probabilities resized back to the image's size
/// (INTER_LINEAR), thresholded, and split into nuclei by predicted_instances
/// at options.split (a boundary model's boundary_objects) against the
/// truth's objects (instance_score). Runs the network twice per image (loss needs the
/// logits, the instance score the probabilities). With options.tiles, each
/// image is predicted once at its own size in tiles instead, and its pixel
/// metrics are probability_stats' (train/tta.h) of those probabilities
/// against the truth at that size. Throws UserError as
/// find_eval_samples and load_truth, for a threshold outside (0, 1), a tile overlap outside [0, 1), and for a
/// truth whose size differs from its image's, and a categorical model other
/// than a 3-class one with other truth than masks.
EvalResult evaluate_images(Trainer& trainer, const EvalOptions& options);

/// The first line of write_scores_csv's files.
inline constexpr const char* kScoresCsvHeader = "image,n_true,n_pred,score,precision_50,precision_75";

/// Writes the per-image scores as CSV to path atomically: header
/// kScoresCsvHeader and one row per image, its name quoted as RFC 4180 says
/// when it holds a comma, a double quote or a line break.
/// Throws UserError naming path when it cannot be written.
void write_scores_csv(const EvalResult& result, const std::string& path);

}  // namespace trainer
