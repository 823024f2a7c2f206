#pragma once
// Three-class masks from instance label images: background, nucleus interior
// and nucleus boundary, the targets with which a categorical U-Net separates
// touching nuclei (Caicedo et al. 2019, "Evaluation of Deep Learning
// Strategies for Nucleus Segmentation in Fluorescence Images", Cytometry A
// 95(9); the "boundary" class of the DSB 2018 solutions).
#include <opencv2/core.hpp>
#include <string>
#include <vector>

namespace trainer {

/// The classes of boundary_classes' masks.
enum BoundaryClass : uint8_t { kBackground = 0, kInterior = 1, kBoundary = 2 };

/// labels: CV_8UC1 or CV_16UC1 [H, W], 0 background, 1..N one object each.
/// Returns CV_8UC1 [H, W]: kBackground where labels is 0; kBoundary for an
/// object pixel within `width` pixels (a (2 width + 1)^2 square) of a pixel
/// of another value (background or another object; beyond the image edge
/// counts as the same value); kInterior for the other object pixels. Throws
/// InternalError for another type or width < 1.
cv::Mat boundary_classes(const cv::Mat& labels, int width);

/// For every label image <stem><labels_suffix>.<ext> in labels_dir, writes
/// <output_dir>/<stem><mask_suffix>.png (8-bit boundary_classes, atomically;
/// the folder is created). Returns the files written, in name order. Throws
/// UserError naming the file and the fix for a missing folder, a folder
/// without images, a name without labels_suffix, masks that exist already
/// unless overwrite (before anything is written), a file that cannot be
/// decoded or is not a single-channel 8- or 16-bit image, one whose single
/// nonzero value covers several separate (8-connected) objects (a binary
/// mask, not labels; every file is checked before any is written), and an
/// output that cannot be written.
std::vector<std::string> convert_labels_to_classes(const std::string& labels_dir, const std::string& output_dir,
                                                   const std::string& labels_suffix, const std::string& mask_suffix,
                                                   int width, bool overwrite = false);

}  // namespace trainer
