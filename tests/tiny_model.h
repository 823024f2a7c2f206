#pragma once
// The tiny model and data shared by the tower tests (CPU and GPU): a 16x16x3
// U-Net-like network with every layer kind that keeps towers in step
// (synchronized or plain BatchNormalization, seeded Dropout, a skip
// concatenation, a transposed convolution), and 13 image/mask pairs.
#include <string>

#include "data/dataset.h"

namespace trainer::testing {

/// The tiny model's config (batch 5, seed 7, bce_dice, SGD nesterov); its BN
/// layer is synchronized when `synchronized`.
std::string tiny_config(bool synchronized);
/// 13 samples: random images in [0, 255], masks from a disc per sample.
Dataset tiny_data();

}  // namespace trainer::testing
