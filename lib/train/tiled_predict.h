#pragma once
// Sliding-window prediction of an image at its own resolution: tiles of the
// model's input size, batched over the towers, blended (data/tiling.h). The
// activations held are those of one batch of tiles, whatever the image's size.
#include <opencv2/core.hpp>

#include "data/tiling.h"
#include "train/trainer.h"

namespace trainer {

struct TiledPrediction {
  TileOptions tiles;
  int batch_size = 1;  ///< Tiles per global batch, split over the towers.
  bool tta = false;    ///< Each tile's prediction averaged over its symmetries (train/tta.h).
};

/// Predicts image (pixels [H, W, C] as decode_image_pixels gives them at the
/// file's size: CV_8UC(C) or CV_16UC(C), RGB, C the model input's channels)
/// in tiles of the model's input size [h, w] placed by tile_starts (overlap),
/// blended by BlendBand (blend), and sends the probabilities [H, W, K] row
/// band by row band, top to bottom, to sink (rows of CV_32FC(K), K the model
/// output's channels). An image smaller than a tile along an axis is padded
/// to the tile by mirroring (cv::BORDER_REFLECT_101, as much on each side;
/// the extra half pixel after), and the padding's predictions are dropped.
/// Memory beyond the image: one batch of tiles and their activations, and a
/// band of [h, max(W, w)] sums. Throws InternalError for pixels of another
/// channel count or type.
void predict_tiled(Trainer& trainer, const cv::Mat& image, const TiledPrediction& p, const RowSink& sink);

/// predict_tiled's probabilities gathered into one map: CV_32FC(K) [H, W].
cv::Mat predict_tiled_map(Trainer& trainer, const cv::Mat& image, const TiledPrediction& p);

}  // namespace trainer
