#include "data/crops.h"

#include <opencv2/core.hpp>

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"

namespace trainer {

namespace {

/// SplitMix64's output function of a state (Steele, Lea and Flood 2014).
uint64_t split_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A stream of random numbers from a seed: SplitMix64.
class Draws {
 public:
  explicit Draws(uint64_t seed) : state_(seed) {}
  uint64_t next() { return split_mix(state_ += 0x9E3779B97F4A7C15ull); }
  /// Uniform in [0, 1).
  double unit() { return double(next() >> 11) * 0x1.0p-53; }
  /// Uniform in [0, n), n >= 1.
  long long below(long long n) { return std::min(n - 1, (long long)(unit() * double(n))); }

 private:
  uint64_t state_;
};

/// The foreground pixels of mask (values above 0 but the type's largest, which marks ignored pixels), counted in
/// row-major order; with stop_at >= 0, stops at that one, its place in *at.
template <class T>
long long count_foreground(const cv::Mat& mask, long long stop_at, cv::Point* at) {
  const T ignored = std::numeric_limits<T>::max();
  long long n = 0;
  for (int y = 0; y < mask.rows; ++y) {
    const T* m = mask.ptr<T>(y);
    for (int x = 0; x < mask.cols; ++x)
      if (m[x] > 0 && m[x] != ignored && n++ == stop_at) {
        *at = {x, y};
        return n;
      }
  }
  return n;
}

/// The number of foreground pixels of mask; with stop_at >= 0, *at <- the stop_at-th of them in row-major order.
long long foreground_pixels(const cv::Mat& mask, long long stop_at = -1, cv::Point* at = nullptr) {
  return mask.depth() == CV_8U ? count_foreground<uint8_t>(mask, stop_at, at)
                               : count_foreground<uint16_t>(mask, stop_at, at);
}

/// The corner along one axis of `length` pixels (mirrored out to `window` when shorter, as much before as
/// after, the odd pixel after): from a position in [0, room] of the mirrored axis, less the pixels before.
int axis_corner(int length, int window, long long position) {
  const int padded = std::max(length, window), before = (padded - length) / 2;
  return int(std::clamp<long long>(position, 0, padded - window)) - before;
}

}  // namespace

cv::Point crop_corner(const cv::Mat& mask, const CropSampling& s, long long pass, int c) {
  Draws d(split_mix(s.seed ^ split_mix(uint64_t(pass) ^ split_mix(uint64_t(c)))));
  const cv::Size image = mask.size(), w = s.size;
  const int room_x = std::max(image.width, w.width) - w.width, room_y = std::max(image.height, w.height) - w.height;
  if (d.unit() < s.foreground) {
    if (const long long n = foreground_pixels(mask); n > 0) {
      cv::Point p;
      foreground_pixels(mask, d.below(n), &p);
      // The window centred on p in the mirrored image's coordinates, moved inside it.
      const int before_x = (std::max(image.width, w.width) - image.width) / 2,
                before_y = (std::max(image.height, w.height) - image.height) / 2;
      return {axis_corner(image.width, w.width, p.x + before_x - w.width / 2),
              axis_corner(image.height, w.height, p.y + before_y - w.height / 2)};
    }
  }
  const long long x = d.below(room_x + 1), y = d.below(room_y + 1);
  return {axis_corner(image.width, w.width, x), axis_corner(image.height, w.height, y)};
}

cv::Mat crop_window(const cv::Mat& img, cv::Point corner, cv::Size size) {
  const int left = std::max(0, -corner.x), top = std::max(0, -corner.y),
            right = std::max(0, corner.x + size.width - img.cols), bottom = std::max(0, corner.y + size.height - img.rows);
  if (left + top + right + bottom == 0) return img(cv::Rect(corner, size));
  cv::Mat padded;
  cv::copyMakeBorder(img, padded, top, bottom, left, right, cv::BORDER_REFLECT_101);
  return padded(cv::Rect(corner + cv::Point(left, top), size));
}

void take_crops(const Dataset& native, const CropSampling& s, long long pass, const std::vector<int>& ids,
                Dataset& out) {
  if (!native.native()) throw InternalError("take_crops: a dataset not held at its images' own sizes");
  const int n = int(ids.size()), channels = native.native_images[0].channels();
  out.images.set_dtype(native.native_images[0].depth() == CV_16U ? DType::U16 : DType::U8);
  out.images.resize(Shape{n, s.size.height, s.size.width, channels});
  out.masks.set_dtype(native.native_masks[0].depth() == CV_16U ? DType::U16 : DType::U8);
  out.masks.resize(Shape{n, s.size.height, s.size.width, 1});
  out.names.clear();
  for (int k = 0; k < n; ++k) {
    const int c = ids[size_t(k)], i = c / s.per_image;
    if (c < 0 || i >= native.size()) throw InternalError("take_crops: crop id " + std::to_string(c) + " of no sample");
    const cv::Mat& img = native.native_images[size_t(i)];
    const cv::Mat& mask = native.native_masks[size_t(i)];
    const cv::Point corner = crop_corner(mask, s, pass, c);
    crop_window(img, corner, s.size).copyTo(cv::Mat(s.size, img.type(), out.images.raw_sample(k)));
    crop_window(mask, corner, s.size).copyTo(cv::Mat(s.size, mask.type(), out.masks.raw_sample(k)));
    out.names.push_back(native.names[size_t(i)]);
  }
}

}  // namespace trainer
