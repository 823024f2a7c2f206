#pragma once
// Nucleus instances from a binary foreground mask: touching nuclei split by a
// marker-controlled watershed on the distance to the background, the
// post-processing DSB 2018 entries and CellProfiler's "IdentifyPrimaryObjects
// (shape)" use. The markers are the h-maxima of the distance transform
// (Soille, Morphological Image Analysis, 2003, 6.3.4): its peaks that rise
// at least h above the saddle to any higher one (a peak's dynamics, found by
// union-find over the pixels from the highest down), so a nucleus with a
// bumpy outline keeps one marker and two nuclei joined by a neck get one
// each. Each foreground pixel then joins the marker it floods from first
// when the distance map is flooded from its maxima down (Meyer's
// priority-queue watershed, 1994). O(n log n) in the component's pixels.
#include <opencv2/core.hpp>

namespace trainer {

/// The watershed split's setting.
struct InstanceSplit {
  /// h in pixels of distance: two maxima of the distance transform stay
  /// apart when the saddle between them lies at least h below the lower one.
  /// 0: no split (each 8-connected component is one nucleus).
  double min_depth = 2.0;
};

/// foreground: CV_8UC1 [H, W], nonzero = foreground. Returns CV_32SC1
/// [H, W]: 0 background, 1..N one label per nucleus, numbered in raster
/// order of their first pixel. Each 8-connected component of the foreground
/// is one nucleus, or (two or more markers in it) is split by the watershed
/// of its distance transform (cv::distanceTransform, L2, precise); every
/// foreground pixel gets a label. Deterministic (ties flood in the order the
/// pixels were reached). InternalError for another type.
cv::Mat split_instances(const cv::Mat& foreground, const InstanceSplit& s = {});

}  // namespace trainer
