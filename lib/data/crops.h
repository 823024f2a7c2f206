#pragma once
// Training crops at the images' own resolution (data.crop), as nnU-Net,
// StarDist and Cellpose train: each step's samples are windows of the
// model's input size cut from images held at their own size, a share of them
// centred on a foreground pixel. Every crop is a function of (seed, pass,
// sample, draw) alone, so a resumed run and any number of towers see the
// same crops.
#include <opencv2/core.hpp>

#include <cstdint>
#include <vector>

#include "data/dataset.h"

namespace trainer {

/// How crops are drawn.
struct CropSampling {
  cv::Size size;            ///< The model's input (width x height).
  double foreground = 0;    ///< The fraction of draws centred on a foreground pixel, in [0, 1].
  int per_image = 1;        ///< Crops per image per pass: crop id c is sample c / per_image, draw c % per_image.
  uint64_t seed = 0;        ///< training.seed.
};

/// Draws the crops of a dataset held at its images' own sizes
/// (Dataset::native()): each image's foreground pixels (mask values above 0
/// other than the type's largest, which marks ignored pixels) are counted per
/// row once, so a draw centred on one costs a row's scan.
class CropSampler {
 public:
  /// Keeps a reference to native, which must outlive the sampler.
  /// InternalError for a dataset not held at its own sizes.
  CropSampler(const Dataset& native, const CropSampling& s);
  CropSampler(Dataset&& native, const CropSampling& s) = delete;  ///< A temporary would not outlive it.

  const CropSampling& sampling() const { return s_; }

  /// The top-left corner of crop id c's window in pass `pass` (1-based)
  /// over its image. With probability foreground (and a foreground pixel in
  /// the mask), the window is centred on a foreground pixel drawn uniformly,
  /// moved inside the image; else it lies uniformly anywhere in it. An image
  /// smaller than the window along an axis counts as mirrored out to it
  /// (crop_window), so the corner is then negative along that axis: -(the
  /// pixels added before). Random numbers: SplitMix64 (Steele et al. 2014)
  /// from (seed, pass, c). InternalError for an id beyond the dataset.
  cv::Point corner(long long pass, int c) const;

  /// out's sample k (images and masks [K, h, w, C] in native's held types,
  /// K = ids.size(), names from native's) <- crop id ids[k] of pass `pass`;
  /// out's memory is reused when it holds enough. InternalError for an id
  /// beyond the dataset.
  void take(long long pass, const std::vector<int>& ids, Dataset& out) const;

 private:
  /// (x, y) of image i's n-th foreground pixel in row-major order (n < its count).
  cv::Point foreground_pixel(int i, long long n) const;

  const Dataset& native_;
  CropSampling s_;
  /// Per image: the foreground pixels in its rows before row y, y = 0..rows (the last: all of them).
  std::vector<std::vector<long long>> before_row_;
};

/// The window of img (any type) at `corner` of `size`: a view when it lies
/// inside img, else a copy of img mirrored out (cv::BORDER_REFLECT_101) by
/// as many pixels before as -corner gives and as many after as needed.
cv::Mat crop_window(const cv::Mat& img, cv::Point corner, cv::Size size);

}  // namespace trainer
