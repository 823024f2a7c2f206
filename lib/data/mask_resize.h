#pragma once
// Resizing masks so that they stay on their images. Images are resized with
// INTER_AREA (decode_image), which averages each output pixel's footprint and
// so keeps objects where they are; INTER_NEAREST instead takes the top-left
// source pixel of each footprint, which moves a mask (s - 1) / (2 s) output
// pixels down and to the right of its image at a downscale by s. A mask of
// discrete values is therefore resized value by value with INTER_AREA, and
// each output pixel takes the value that covers most of it.
#include <opencv2/core.hpp>

namespace trainer {

/// mask (single-channel 8U or 16U: 0/1, class indices, or any discrete
/// values, at most 65536 distinct) resized to size: for each value present,
/// the share of every output pixel it covers (cv::resize with INTER_AREA of
/// its 0/1 plane, as decode_image resizes images), and each output pixel gets
/// the value of the largest share, the lowest value on a tie. Same type as
/// mask; the same image when the sizes agree.
cv::Mat resize_mask(const cv::Mat& mask, cv::Size size);

}  // namespace trainer
