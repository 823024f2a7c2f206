#pragma once
// How a Dataset holds its decoded samples on the host, and their conversion
// to float32 as they are copied into a batch. Images [N, H, W, C] are held
// as their files store them: U8 for 8-bit files, U16 when any file is
// 16-bit (an 8-bit one then widened by 257, so that both read back on one
// scale); masks [N, H, W, 1] as U8 (U16 beyond 255 classes), the type's
// largest value marking an ignored pixel. A dataset made in memory (tests,
// benchmarks) may hold F32 tensors, read as they are.
#include <opencv2/core.hpp>

#include <cstddef>

#include "core/tensor.h"

namespace trainer {

/// The type masks of `classes` classes (0: binary) are held in: U8 up to 255
/// classes (values 0..254, 255 ignored), else U16.
DType mask_storage(int classes);

/// Sample i of held images or masks (U8, U16 or F32) as an OpenCV image over
/// the tensor's memory ([H, W] of C-channel pixels). InternalError for bf16.
cv::Mat held_sample(const Tensor& held, int i);

/// out [H, W, C] <- pixels (a held_sample, or one transformed in its type)
/// as float32 in [0, 255] times brightness, clipped to [0, 255] when
/// brightness is not 1: U8 values as they are, U16 ones times 255/65535, F32
/// as they are.
void held_pixels_to_float(const cv::Mat& pixels, float brightness, float* out);

/// out [H, W, 1] <- mask pixels (a held_sample of masks, or one transformed
/// in its type) as float32: U8/U16 values as they are, the type's largest as
/// kIgnoredPixel (core/class_mask.h); F32 as they are.
void held_mask_to_float(const cv::Mat& mask, float* out);

/// out [H, W, 1] <- sample i of held masks as float32: U8/U16 values as they
/// are, the type's largest as kIgnoredPixel (core/class_mask.h); F32 copied.
/// InternalError for a bf16 tensor.
void mask_sample_to_float(const Tensor& masks, int i, float* out);

/// mask (CV_8UC1 or CV_16UC1, continuous) <- its float32 values: 0/1,
/// class indices, or kIgnoredPixel (stored as the type's largest).
void store_mask(const float* values, cv::Mat& mask);

/// Sample i of masks (U8 or U16, mask_storage) <- n float32 mask values:
/// 0/1, class indices, or kIgnoredPixel (stored as the type's largest).
void store_mask_sample(const float* values, Tensor& masks, int i);

}  // namespace trainer
