#pragma once
// Masks drawn over images: a translucent fill plus the outline.
#include <opencv2/core.hpp>

namespace trainer::viz {

/// Share of the colour in a filled mask pixel: out = (1 - a) * image + a * colour.
constexpr double kOverlayAlpha = 0.35;

/// Draws mask over image in place: every pixel where mask != 0 is blended
/// with colour (kOverlayAlpha), then the mask's outlines (cv::findContours,
/// outer and hole borders) are drawn 1 px wide in colour on the mask's own
/// border pixels. Pixels where mask == 0 are unchanged.
/// image: 8-bit BGR [H, W]; mask: 8-bit one channel [H, W]; colour: BGR.
/// Throws InternalError for other types or sizes.
void overlay_mask(cv::Mat& image, const cv::Mat& mask, const cv::Scalar& colour);

}  // namespace trainer::viz
