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

/// f(x) for each foreground pixel of mask row r: values above 0 but the type's largest (an ignored pixel).
template <class T, class F>
void for_foreground(const cv::Mat& mask, int r, F f) {
  const T ignored = std::numeric_limits<T>::max();
  const T* m = mask.ptr<T>(r);
  for (int x = 0; x < mask.cols; ++x)
    if (m[x] > 0 && m[x] != ignored) f(x);
}

/// f(x) for each foreground pixel of row r of a held mask (CV_8UC1 or CV_16UC1).
template <class F>
void row_foreground(const cv::Mat& mask, int r, F f) {
  if (mask.depth() == CV_8U)
    for_foreground<uint8_t>(mask, r, f);
  else
    for_foreground<uint16_t>(mask, r, f);
}

/// The corner along one axis of `length` pixels (mirrored out to `window` when shorter, as much before as
/// after, the odd pixel after): from a position in [0, room] of the mirrored axis, less the pixels before.
int axis_corner(int length, int window, long long position) {
  const int padded = std::max(length, window), before = (padded - length) / 2;
  return int(std::clamp<long long>(position, 0, padded - window)) - before;
}

}  // namespace

CropSampler::CropSampler(const Dataset& native, const CropSampling& s) : native_(native), s_(s) {
  if (!native.native()) throw InternalError("CropSampler: a dataset not held at its images' own sizes");
  before_row_.resize(native.native_masks.size());
  for (size_t i = 0; i < before_row_.size(); ++i) {
    const cv::Mat& mask = native.native_masks[i];
    std::vector<long long>& b = before_row_[i];
    b.assign(size_t(mask.rows) + 1, 0);
    for (int r = 0; r < mask.rows; ++r) {
      long long n = 0;
      row_foreground(mask, r, [&n](int) { ++n; });
      b[size_t(r) + 1] = b[size_t(r)] + n;
    }
  }
}

cv::Point CropSampler::foreground_pixel(int i, long long n) const {
  const std::vector<long long>& b = before_row_[size_t(i)];
  const int r = int(std::upper_bound(b.begin(), b.end(), n) - b.begin()) - 1;  // b[r] <= n < b[r + 1]
  long long k = n - b[size_t(r)];
  cv::Point at;
  row_foreground(native_.native_masks[size_t(i)], r, [&](int x) {
    if (k-- == 0) at = {x, r};
  });
  return at;
}

cv::Point CropSampler::corner(long long pass, int c) const {
  const int i = c / s_.per_image;
  if (c < 0 || i >= native_.size()) throw InternalError("CropSampler: crop id " + std::to_string(c) + " of no sample");
  Draws d(split_mix(s_.seed ^ split_mix(uint64_t(pass) ^ split_mix(uint64_t(c)))));
  const cv::Size image = native_.native_masks[size_t(i)].size(), w = s_.size;
  const long long count = before_row_[size_t(i)].back();
  if (d.unit() < s_.foreground && count > 0) {
    const cv::Point p = foreground_pixel(i, d.below(count));
    // The window centred on p in the mirrored image's coordinates, moved inside it.
    const int before_x = (std::max(image.width, w.width) - image.width) / 2,
              before_y = (std::max(image.height, w.height) - image.height) / 2;
    return {axis_corner(image.width, w.width, p.x + before_x - w.width / 2),
            axis_corner(image.height, w.height, p.y + before_y - w.height / 2)};
  }
  const int room_x = std::max(image.width, w.width) - w.width, room_y = std::max(image.height, w.height) - w.height;
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

void CropSampler::take(long long pass, const std::vector<int>& ids, Dataset& out) const {
  const int n = int(ids.size()), channels = native_.native_images[0].channels();
  out.images.set_dtype(native_.native_images[0].depth() == CV_16U ? DType::U16 : DType::U8);
  out.images.resize(Shape{n, s_.size.height, s_.size.width, channels});
  out.masks.set_dtype(native_.native_masks[0].depth() == CV_16U ? DType::U16 : DType::U8);
  out.masks.resize(Shape{n, s_.size.height, s_.size.width, 1});
  out.names.clear();
  for (int k = 0; k < n; ++k) {
    const cv::Point at = corner(pass, ids[size_t(k)]);  // checks the id
    const size_t i = size_t(ids[size_t(k)] / s_.per_image);
    const cv::Mat &img = native_.native_images[i], &mask = native_.native_masks[i];
    crop_window(img, at, s_.size).copyTo(cv::Mat(s_.size, img.type(), out.images.raw_sample(k)));
    crop_window(mask, at, s_.size).copyTo(cv::Mat(s_.size, mask.type(), out.masks.raw_sample(k)));
    out.names.push_back(native_.names[i]);
  }
}

}  // namespace trainer
