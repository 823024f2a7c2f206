#pragma once
// Sliding-window (tiled) prediction's geometry and blending: where the tiles
// of a large image go, the window that weighs each tile's prediction (high in
// its middle, where the network saw the most context), and the accumulation
// of the weighted tiles over a band of rows, so that an image of any height
// costs one tile-high band of sums, not a map of the whole image. As
// nnU-Net (Isensee et al. 2021, Nature Methods 18) and MONAI's
// sliding_window_inference predict.
#include <opencv2/core.hpp>

#include <functional>
#include <string>
#include <vector>

namespace trainer {

/// How overlapping tiles are weighed where they meet.
enum class TileBlend {
  kGaussian,  ///< exp(-d^2 / (2 sigma^2)) per axis, sigma = tile / 8 (nnU-Net's), peak 1.
  kLinear,    ///< A tent per axis: (min(i, t - 1 - i) + 1) / ceil(t / 2), peak 1.
};

/// "gaussian" or "linear".
const char* tile_blend_name(TileBlend blend);
/// The blend named name: "gaussian" or "linear", which the config reader and
/// the flags admit alone (InternalError otherwise).
TileBlend parse_tile_blend(const std::string& name);

/// How an image is cut into tiles of the model's input size.
struct TileOptions {
  /// The fraction of a tile's side that neighbouring tiles share, in [0, 1):
  /// tiles step by at most tile * (1 - overlap) pixels.
  double overlap = 0.5;
  TileBlend blend = TileBlend::kGaussian;
  /// The image is resized by this factor before it is tiled, and its
  /// prediction back (data.crop's scale: the resolution the model trained at).
  double scale = 1.0;
};

/// Checks overlap is in [0, 1); UserError naming `where` otherwise.
void check_tile_overlap(double overlap, const std::string& where);

/// The first pixel of each tile along an axis of `length` pixels for tiles of
/// `tile` pixels (length >= tile >= 1, overlap in [0, 1)): n = ceil((length -
/// tile) / step) + 1 tiles for step = max(1, floor(tile * (1 - overlap))),
/// spread evenly from 0 to length - tile (start i = round(i * (length - tile)
/// / (n - 1))), so that neighbours never step by more than step. Throws
/// InternalError for other arguments.
std::vector<int> tile_starts(int length, int tile, double overlap);

/// The weight of each pixel of a tile: CV_32FC1 [tile.height, tile.width],
/// the product of blend's profile along each axis, all > 0, 1 at the middle.
cv::Mat blend_window(cv::Size tile, TileBlend blend);

/// Receives the final rows [y0, y0 + rows.rows) of a blended prediction:
/// CV_32FC(K) [rows, width]; the Mat is valid during the call only.
using RowSink = std::function<void(int y0, const cv::Mat& rows)>;

/// Blends tiles of a prediction of `channels` values per pixel over an image
/// of `image` size: each pixel's sum of window * prediction over the tiles
/// that cover it, divided by the sum of their windows. Tiles arrive in rows
/// (non-decreasing y); the rows above a tile's y are final when it arrives
/// and go to the sink, so the sums held are one tile high: [tile.height,
/// image.width] of channels + 1 floats.
class BlendBand {
 public:
  BlendBand(cv::Size image, cv::Size tile, int channels, TileBlend blend, RowSink sink);
  /// Adds the prediction p [tile.height, tile.width, channels] of the tile
  /// whose top-left pixel is at (fully inside the image). Throws
  /// InternalError for a tile above the last one's row or outside the image.
  void add(cv::Point at, const float* p);
  /// Sends the rows not yet sent. InternalError when a pixel was never covered.
  void finish();

 private:
  /// Sends rows [top_, y) and moves the band down to start at y.
  void send_until(int y);

  cv::Size image_, tile_;
  int channels_;
  cv::Mat window_;  ///< blend_window(tile_).
  cv::Mat sum_;     ///< CV_32FC(channels_) [tile.height, image.width]: rows top_.. of the weighted sums.
  cv::Mat weight_;  ///< CV_32FC1 [tile.height, image.width]: their windows' sums.
  cv::Mat out_;     ///< The rows sent, reused.
  int top_ = 0;     ///< The image row of the band's first row.
  RowSink sink_;
};

}  // namespace trainer
