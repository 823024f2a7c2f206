#include "train/tiled_predict.h"

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>

#include "core/error.h"
#include "data/held_samples.h"
#include "data/image_decode.h"
#include "train/tta.h"

namespace trainer {

namespace {

/// Pixels added before and after an axis of `length` to reach `tile`: as much on each side, the odd one after.
std::pair<int, int> padding(int length, int tile) {
  const int extra = std::max(0, tile - length);
  return {extra / 2, extra - extra / 2};
}

/// Tiles waiting for their batch's prediction: [batch, h, w, C] and where each goes.
struct TileBatch {
  Tensor images;
  std::vector<cv::Point> at;
};

}  // namespace

void predict_tiled(Trainer& trainer, const cv::Mat& image, const TiledPrediction& p, const RowSink& sink) {
  if (p.tiles.scale != 1) {  // tiles of the resized image; its probabilities resized back as one map
    cv::Mat scaled, back;
    cv::resize(image, scaled, scaled_size(image.size(), p.tiles.scale), 0, 0, cv::INTER_AREA);
    TiledPrediction at_scale = p;
    at_scale.tiles.scale = 1;
    cv::resize(predict_tiled_map(trainer, scaled, at_scale), back, image.size(), 0, 0, cv::INTER_LINEAR);
    return sink(0, back);
  }
  const Shape in = trainer.model().input_shape(), out = trainer.model().output_shape();
  if (image.channels() != in.c || (image.depth() != CV_8U && image.depth() != CV_16U) || out.h != in.h ||
      out.w != in.w)
    throw InternalError("predict_tiled: pixels of " + std::to_string(image.channels()) +
                        " channels (depth " + std::to_string(image.depth()) + ") for input " + in.hwc());
  const cv::Size tile(in.w, in.h);
  const auto [top, bottom] = padding(image.rows, tile.height);
  const auto [left, right] = padding(image.cols, tile.width);
  cv::Mat padded = image;
  if (top + bottom + left + right > 0)
    cv::copyMakeBorder(image, padded, top, bottom, left, right, cv::BORDER_REFLECT_101);
  // The padding's rows and columns are cut from each band before it reaches sink.
  const cv::Rect kept(left, top, image.cols, image.rows);
  BlendBand band(padded.size(), tile, out.c, p.tiles.blend, [&](int y0, const cv::Mat& rows) {
    const int lo = std::max(y0, kept.y), hi = std::min(y0 + rows.rows, kept.y + kept.height);
    if (lo < hi) sink(lo - kept.y, rows(cv::Range(lo - y0, hi - y0), cv::Range(kept.x, kept.x + kept.width)));
  });
  const std::vector<int> ys = tile_starts(padded.rows, tile.height, p.tiles.overlap),
                         xs = tile_starts(padded.cols, tile.width, p.tiles.overlap);
  const size_t total = ys.size() * xs.size(), batch = size_t(std::max(1, p.batch_size));
  TileBatch b{Tensor(in.with_batch(int(std::min(total, batch)))), {}};
  const auto predict_batch = [&] {
    b.images.resize(in.with_batch(int(b.at.size())));  // the last batch may be short; a smaller size keeps the data
    const Tensor probs =
        p.tta ? predict_tta(trainer, b.images, p.batch_size) : trainer.predict(b.images, p.batch_size);
    for (size_t j = 0; j < b.at.size(); ++j) band.add(b.at[j], probs.sample(int(j)));
    b.at.clear();
  };
  for (int y : ys)
    for (int x : xs) {
      held_pixels_to_float(padded(cv::Rect(cv::Point(x, y), tile)), 1.f, b.images.sample(int(b.at.size())));
      b.at.emplace_back(x, y);
      if (b.at.size() == batch) predict_batch();
    }
  if (!b.at.empty()) predict_batch();
  band.finish();
}

BatchStats tiled_stats(Trainer& trainer, const cv::Mat& image, const Tensor& masks, const TiledPrediction& p,
                       Tensor& probs) {
  const int k = trainer.model().output_shape().c;
  probs.resize(Shape{1, image.rows, image.cols, k});
  predict_tiled_map(trainer, image, p, cv::Mat(image.rows, image.cols, CV_32FC(k), probs.data()));
  return probability_stats(trainer, probs, masks);
}

BatchStats evaluate_native(Trainer& trainer, const Dataset& native, const std::vector<int>& indices,
                           const TiledPrediction& p) {
  if (!native.native()) throw InternalError("evaluate_native: a dataset not held at its images' own sizes");
  BatchStats sum = trainer.empty_stats();
  Tensor masks, probs;
  for (int i : indices) {
    const cv::Mat& mask = native.native_masks[size_t(i)];
    masks.resize(Shape{1, mask.rows, mask.cols, 1});
    held_mask_to_float(mask, masks.data());
    sum.add(tiled_stats(trainer, native.native_images[size_t(i)], masks, p, probs));
  }
  return sum;
}

TiledPrediction crop_tiles(const CropConfig& crop, int batch_size) {
  // Scale 1: the held samples are already at crop.scale.
  return TiledPrediction{{crop.tile_overlap, parse_tile_blend(crop.tile_blend), 1.0},
                         batch_size, false};
}

cv::Mat predict_tiled_map(Trainer& trainer, const cv::Mat& image, const TiledPrediction& p, cv::Mat map) {
  map.create(image.size(), CV_32FC(trainer.model().output_shape().c));  // kept when it fits: a wrapped tensor
  predict_tiled(trainer, image, p, [&](int y0, const cv::Mat& rows) { rows.copyTo(map.rowRange(y0, y0 + rows.rows)); });
  return map;
}

}  // namespace trainer
