#pragma once
// The tiny model and data shared by the tower tests (CPU and GPU): a 16x16x3
// U-Net-like network with every layer kind that keeps towers in step
// (synchronized or plain BatchNormalization, seeded Dropout, a skip
// concatenation, a transposed convolution), a two-level U-Net for the bf16
// activation path, a squeeze-and-excitation network, a softmax network of K
// classes, and 13 image/mask pairs (binary, or of three classes).
#include <string>
#include <vector>

#include "config/config.h"
#include "data/dataset.h"

namespace trainer::testing {

/// The tiny model's config (batch 5, seed 7, bce_dice, SGD nesterov); its BN
/// layer is synchronized when `synchronized`.
std::string tiny_config(bool synchronized);
/// A two-level U-Net on the same input, without BN or Dropout (training as
/// tiny_config's), so that a bf16 tower stores bf16 from c1 to cat: through a
/// pooling, a transposed convolution, a concatenation and the skip gradient
/// summed at c1b (two consumers); c3 writes fp32 for the one-filter output.
std::string tiny_unet_config();
/// A one-level network (training as tiny_config's) with a
/// squeeze-and-excitation block (GlobalAveragePooling2D, Reshape, two Dense,
/// a [1, 1, C] Multiply) and a GlobalMaxPooling2D channel gate.
std::string tiny_se_config();
/// The tiny model's topology (training as tiny_config's) with every layer
/// between the first convolution c1 and the output frozen (trainable: false):
/// a synchronized BatchNormalization, a Conv2D, a PReLU, a SeparableConv2D, a
/// DepthwiseConv2D with gelu (applied after it, kept_activation.h), a
/// Conv2DTranspose, a GroupNormalization and a LayerNormalization, so that
/// c1's gradient passes through each frozen kind's dx without its weight
/// gradients. With `frozen` false the same layers train, but for bn1 (frozen
/// in both: a frozen BatchNormalization computes as in inference).
std::string tiny_frozen_config(bool frozen = true);
/// 13 samples: random images in [0, 255], masks from a disc per sample.
Dataset tiny_data();
/// max over i of |a[i] - b[i]| / max(1, |b[i]|): how far weights a are from
/// reference weights b; infinity when the sizes differ.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b);
/// Trains config on data's batches {0..4}, {5..9}, {10, 11, 12}, {3, 9}
/// (13 samples: tiny_data() by default) with 1, 2 and 3 CPU towers (Catch
/// checks): the towers of a run hold the same bits, training moves the
/// weights (by more than 1e-3 relative), and 2 and 3 towers reach one
/// tower's weights within 2e-5 (relative, at least 1).
void check_towers_reach_one_tower(const Config& config, const Dataset& data = tiny_data());
/// A one-level U-Net (synchronized BN) ending in `classes` filters with
/// last_activation, trained with loss (metrics accuracy, mean_iou, dice;
/// otherwise as tiny_config's).
std::string tiny_classes_config(int classes, const std::string& loss = "sparse_categorical_crossentropy",
                                const std::string& last_activation = "softmax");
/// tiny_data() with three-class masks: each disc's boundary_classes (width 1).
Dataset tiny_class_data();
/// tiny_class_data() with pixels ignored unevenly over the samples (so that
/// tower shards hold different numbers of counted pixels): sample s's first
/// (s % 4) * 40 pixels are kIgnoredPixel.
Dataset tiny_ignored_class_data();

}  // namespace trainer::testing
