#include "data/training_sample.h"

#include <opencv2/core.hpp>

#include "data/held_samples.h"

namespace trainer {

void augmented_sample_to_float(const AugmentationConfig& cfg, const SampleAugmentation& a, const Tensor& images,
                               const Tensor* masks, int i, float* image_to, float* mask_to) {
  const cv::Mat image = held_sample(images, i);
  const cv::Mat mask = mask_to ? held_sample(*masks, i) : cv::Mat();
  // One buffer per thread for each plane, allocated once.
  thread_local cv::Mat image_done, mask_done;
  const cv::Mat* image_from = &image;
  const cv::Mat* mask_from = &mask;
  if (a.warp) {
    const auto m = compose(symmetry_matrix(a.symmetry, image.rows, image.cols), affine_matrix(a.draw, image.rows, image.cols));
    warp_sample(cfg, m, image.depth() == CV_16U ? 65535.0 / 255.0 : 1.0, image, image_done, mask, mask_done);
    image_from = &image_done, mask_from = &mask_done;
  } else if (a.symmetry) {
    apply_symmetry(a.symmetry, image, image_done);
    if (mask_to) apply_symmetry(a.symmetry, mask, mask_done);
    image_from = &image_done, mask_from = &mask_done;
  }
  held_pixels_to_float(*image_from, float(a.draw.brightness), image_to);
  if (mask_to) held_mask_to_float(*mask_from, mask_to);
}

}  // namespace trainer
