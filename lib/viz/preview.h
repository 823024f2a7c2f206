#pragma once
// The preview grid: sample images with their masks overlaid, and optionally a
// trained model's predictions beside them ("check the training data looks
// right", then "look at the predictions after training").
#include <opencv2/core.hpp>
#include <string>

namespace trainer::viz {

struct PreviewOptions {
  std::string images_dir, masks_dir;  ///< Paired as the trainer pairs data.images / data.masks.
  std::string mask_suffix = "_mask";  ///< As data.mask_suffix.
  int count = 16;                     ///< The first `count` pairs in image-name order (fewer if there are fewer).
  int size = 192;                     ///< Panel side in pixels, 32..2048.
  std::string checkpoint;             ///< Non-empty: add a prediction panel per image.
  double threshold = 0.5;             ///< Prediction = probability > threshold; in (0, 1).
};

/// Pixels between tiles and around the grid, and the caption strip under each tile.
constexpr int kPreviewGap = 4, kPreviewCaption = 20;

/// Where things go in a grid of n tiles of `panels` panels (1 or 2) of size x size:
/// cols = ceil(sqrt(n)), rows = ceil(n / cols); tile i at row i / cols, column
/// i % cols; a tile is its panels side by side (kPreviewGap apart) over a
/// caption strip kPreviewCaption high; tiles are kPreviewGap apart and from
/// the border. So the grid is cols * (panels * size + (panels - 1) * gap) +
/// (cols + 1) * gap wide and rows * (size + caption) + (rows + 1) * gap high
/// (n = 4, size 192: 396 x 436 with one panel, 788 x 436 with two).
struct PreviewLayout {
  int n = 0, panels = 1, size = 0, cols = 0, rows = 0;
  cv::Size grid() const;
  /// Panel p (0: image and mask, 1: image and prediction) of tile i.
  cv::Rect panel(int i, int p) const;
  /// Caption strip under panel p of tile i.
  cv::Rect caption(int i, int p) const;
};
/// The layout for n >= 1 tiles; InternalError for n < 1, panels not 1 or 2, size < 1.
PreviewLayout preview_layout(int n, int panels, int size);

/// Where an image of image_size goes in a size x size panel, aspect kept
/// ("letterbox"): scaled by size / max(width, height), each side rounded and
/// at least 1, centred (the left-over rows or columns split as (size - side) / 2
/// before, the rest after).
cv::Rect letterbox_rect(cv::Size image_size, int size);

/// Renders the grid (8-bit BGR, size of preview_layout(n, panels, size).grid()
/// with n = min(count, pairs)). Background dark grey (40, 40, 40); letterbox
/// bars black. Panel 0: the image (decoded as the trainer does, RGB,
/// resized with INTER_AREA into letterbox_rect) with its mask (decoded and
/// binarised and resized as the trainer does) overlaid in green (BGR
/// 0, 255, 0; viz/overlay.h); caption: the image's file stem, cut with "..."
/// to the panel width. With a checkpoint, panel 1: the same image with the
/// prediction overlaid in magenta (255, 0, 255): the model (its stored config
/// and weights, on one CPU tower) predicts the image decoded at the model's
/// input size, the probabilities are resized bilinearly into the letterbox
/// and thresholded; caption "prediction, IoU 0.83": the IoU of the
/// thresholded prediction with the mask at the model's input size (1 when
/// both are empty).
/// Throws UserError, with the flag names of data_tools/preview, for count <
/// 1, size outside 32..2048, threshold outside (0, 1), a missing folder,
/// no images, images without masks, undecodable files and bad checkpoints.
cv::Mat render_preview(const PreviewOptions& options);

}  // namespace trainer::viz
