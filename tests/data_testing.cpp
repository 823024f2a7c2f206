#include "data_testing.h"

#include <algorithm>
#include <opencv2/core.hpp>

#include "data/held_samples.h"

namespace trainer::testing {

void image_sample_to_float(const Tensor& images, int i, float* out) {
  held_pixels_to_float(held_sample(images, i), 1.f, out);
}

void apply_affine(const AugmentationConfig& cfg, const AffineDraw& d, float* image, float* mask, int h, int w, int c) {
  cv::Mat img(h, w, CV_32FC(c), image);
  if (cfg.affine()) {
    // warpAffine reads and writes other buffers: the sample goes through one copy per thread.
    thread_local cv::Mat image_source, mask_source;
    img.copyTo(image_source);
    cv::Mat msk = mask ? cv::Mat(h, w, CV_32FC1, mask) : cv::Mat();
    if (mask) msk.copyTo(mask_source);
    warp_sample(cfg, affine_matrix(d, h, w), 1.0, image_source, img, mask ? mask_source : cv::Mat(), msk);
  }
  if (d.brightness != 1) {
    const float f = float(d.brightness);
    const size_t n = size_t(h) * size_t(w) * size_t(c);
    // min(max()) rather than std::clamp, whose branches keep the loop from vectorizing (the same values).
    for (size_t i = 0; i < n; ++i) image[i] = std::min(std::max(image[i] * f, 0.f), 255.f);
  }
}

}  // namespace trainer::testing
