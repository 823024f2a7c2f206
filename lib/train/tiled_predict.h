#pragma once
// Sliding-window prediction of an image at its own resolution: tiles of the
// model's input size, batched over the towers, blended (data/tiling.h). The
// activations held are those of one batch of tiles, whatever the image's size.
#include <opencv2/core.hpp>

#include "config/config.h"
#include "data/dataset.h"
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
/// band of [h, max(W, w)] sums. With tiles.scale != 1 the image is resized
/// by it first (INTER_AREA) and the probabilities of the resized image back
/// (INTER_LINEAR), sent as one band: a float map of both sizes is held then.
/// Throws InternalError for pixels of another channel count or type.
void predict_tiled(Trainer& trainer, const cv::Mat& image, const TiledPrediction& p, const RowSink& sink);

/// Loss and metric counts of image's tiled prediction (predict_tiled) against
/// masks [1, H, W, 1] (float32 truth as the loss takes it: 0/1, class
/// indices, kIgnoredPixel), as probability_stats (train/tta.h) counts them
/// for one image. probs <- the probabilities [1, H, W, K].
BatchStats tiled_stats(Trainer& trainer, const cv::Mat& image, const Tensor& masks, const TiledPrediction& p,
                       Tensor& probs);

/// The sums of tiled_stats over samples `indices` of native (held at their
/// own sizes: Dataset::native()), each predicted whole in tiles against its
/// mask: validation of a model trained on crops, on what predict gives.
/// InternalError for a dataset held otherwise.
BatchStats evaluate_native(Trainer& trainer, const Dataset& native, const std::vector<int>& indices,
                           const TiledPrediction& p);

/// The tiles of crop's tile_overlap and tile_blend, batch_size tiles per
/// batch, at scale 1: for samples held at crop's scale already
/// (load_dataset's native_scale).
TiledPrediction crop_tiles(const CropConfig& crop, int batch_size);

/// predict_tiled's probabilities gathered into map (CV_32FC(K) [H, W],
/// allocated when it is not of that size and type; it may wrap a tensor's
/// memory). Returns map.
cv::Mat predict_tiled_map(Trainer& trainer, const cv::Mat& image, const TiledPrediction& p, cv::Mat map = {});

}  // namespace trainer
