#pragma once
// Nucleus instances from the class map of a boundary model (the inverse of
// boundary_classes): the post-processing of the three-class U-Nets of
// Caicedo et al. 2019 (Cytometry A 95(9)), where the boundary class keeps
// touching nuclei apart.
#include <opencv2/core.hpp>

namespace trainer {

/// classes: CV_8UC1 [H, W] of boundary_classes' values (kBackground,
/// kInterior, kBoundary; any other value counts as background). The seeds
/// are the 8-connected components of the interior pixels, labelled 1..N in
/// raster order of their first pixel; each grows, breadth first over
/// 8-neighbours, into the boundary pixels connected to it, a boundary pixel
/// going to a seed it is fewest steps from (a tie goes to one of them, the
/// same on every run). Boundary pixels that reach no seed stay background, so a
/// boundary-only blob is no object. Returns CV_32SC1 [H, W], 0 background,
/// 1..N. Throws InternalError for another type.
cv::Mat boundary_objects(const cv::Mat& classes);

}  // namespace trainer
