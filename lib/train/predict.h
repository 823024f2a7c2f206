#pragma once
// Prediction on image files: decode at the model's input size, run the
// towers, resize the probabilities back to each image's own size (or predict
// each image at its own size in tiles), threshold and write mask,
// probability and overlay PNGs.
#include <opencv2/core.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/shape.h"
#include "core/tensor.h"
#include "data/instances.h"
#include "data/tiling.h"
#include "train/trainer.h"

namespace trainer {

/// Images decoded for a model: [N, H, W, C] float32 in [0, 255] at the model's
/// input size (as the data loader decodes them) and each file's own size.
struct ModelImages {
  Tensor images;
  std::vector<cv::Size> sizes;
};

/// Decodes paths with decode_image at input's H, W, C (INTER_AREA resize).
/// Throws UserError naming a file that cannot be decoded.
ModelImages decode_for_model(const std::vector<std::string>& paths, const Shape& input);

/// Sample i of probs [N, h, w, K] resized to size (width x height) with
/// INTER_LINEAR (each class channel alone): CV_32FC(K) [size.height,
/// size.width], values in [0, 1].
cv::Mat probability_map(const Tensor& probs, int i, cv::Size size);

/// 255 where prob > threshold, else 0: CV_8UC1 of prob's size. prob: CV_32FC1.
cv::Mat threshold_map(const cv::Mat& prob, double threshold);

/// Each pixel's most probable class (argmax_class, the first of equal ones):
/// CV_8UC1 of prob's size. prob: CV_32FC(K), 2 <= K <= 256.
cv::Mat class_map(const cv::Mat& prob);

/// The nuclei a model's mask holds, as predict --instances writes them and
/// evaluate scores them: mask is predict's _mask.png (CV_8UC1), of a
/// one-channel model (classes 0: 0/255, split by split_instances'
/// watershed with split) or of a 3-class boundary model (classes 3: its class map,
/// boundary_objects). CV_32SC1, 0 background, 1..N. InternalError for
/// another class count.
cv::Mat predicted_instances(const cv::Mat& mask, int classes, const InstanceSplit& split = {});

/// Checks threshold is in (0, 1); UserError naming flag otherwise.
void check_threshold(double threshold, const std::string& flag);

struct PredictOptions {
  std::string output_dir;      ///< Created if missing.
  double threshold = 0.5;      ///< Mask = probability > threshold; in (0, 1).
  bool probabilities = false;  ///< Also write the probability map (probability_format).
  /// "png": <stem>_prob.png, 8-bit round(255 p); "tiff": <stem>_prob.tif,
  /// float32 p in [0, 1] (for post-processing such as a watershed).
  std::string probability_format = "png";
  bool overlay = false;        ///< Also write <stem>_overlay.png (image with mask contours).
  /// Also write <stem>_instances.png: predicted_instances of the mask as a
  /// 16-bit label image (one-channel and 3-class boundary models).
  bool instances = false;
  InstanceSplit split;  ///< How a one-channel model's touching nuclei are split.
  int batch_size = 1;          ///< Images per global batch, split over the towers.
  bool overwrite = false;      ///< Replace output files that exist (else UserError before any is written).
  bool tta = false;            ///< Average over the input's symmetries (train/tta.h).
  /// Predict each image at its own size in tiles of the model's input
  /// (train/tiled_predict.h) instead of resized to the input and back;
  /// batch_size is then tiles per batch.
  std::optional<TileOptions> tiles;
};

/// Logs that images are predicted at their own size in tiles of input's size, placed and blended as t says.
void log_tiles(const Shape& input, const TileOptions& t);

/// paths without the files a prediction of paths into output_dir writes
/// itself (<output_dir>/<stem>_mask.png, _prob.png, _prob.tif, _overlay.png, _instances.png
/// and a categorical model's _prob_<class>.png / .tif of another path), so
/// that predicting a folder into itself again does not take the last run's
/// masks for images (paths compared after resolving . and .., symbolic links
/// and relative parts); the log says how many were left out.
std::vector<std::string> without_prediction_outputs(const std::vector<std::string>& paths,
                                                    const std::string& output_dir);

/// Predicts every image of paths, batch_size at a time, and writes per image
/// <output_dir>/<stem>_mask.png: 8-bit [H, W] at the image's own size, 255
/// where the probability (resized back with INTER_LINEAR) > threshold, else
/// 0; with options.probabilities <stem>_prob.png (8-bit, round(255 p)); with
/// options.overlay <stem>_overlay.png (the image as 8-bit BGR with the mask's
/// contours, cv::findContours + cv::drawContours, drawn in green). A
/// categorical model (trainer.classes() = K) writes each pixel's most probable
/// class 0..K-1 (class_map of the resized probabilities) into _mask.png
/// instead, K probability maps <stem>_prob_<class>.png (or .tif), and the
/// contours of the classes 1..K-1 in the overlay, each in its colour (class 0
/// is taken as background); the threshold is not used. With options.tiles
/// each image is predicted at its own size by predict_tiled (batch_size
/// tiles per batch) instead of resized to the model's input and its
/// probabilities back, and the outputs are filled band by band. Every file
/// is written atomically. Returns the files written, in order. Throws
/// UserError for a threshold outside (0, 1), batch_size < 1, a tile overlap outside [0, 1), two inputs with
/// the same stem, --instances for a model of other than 0 or 3 classes, an
/// image of more than 65535 predicted nuclei with --instances, an output
/// folder that cannot be created or written, and an
/// image that cannot be decoded (naming it).
std::vector<std::string> predict_files(Trainer& trainer, const std::vector<std::string>& paths,
                                       const PredictOptions& options);

}  // namespace trainer
