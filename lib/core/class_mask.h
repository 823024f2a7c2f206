#pragma once
// Class-index masks: each pixel holds its class 0..K-1 as a float, or
// kIgnoredPixel.

namespace trainer {

/// The value a class-index mask holds at a pixel of the loss's ignore_class:
/// it is no class index, so the backend's class_index maps it to -1 and the
/// pixel counts in neither the loss, its gradient nor the confusion counts.
inline constexpr float kIgnoredPixel = -1.f;

}  // namespace trainer
