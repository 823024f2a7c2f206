#include "tiny_model.h"

#include "data/boundary_classes.h"
#include "train/instance_metrics.h"
#include "train/trainer.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <opencv2/core.hpp>
#include <random>

namespace trainer::testing {

namespace {

/// The data and training sections of both tiny configs.
const char* const kTinyTraining = R"(data: {images: unused, masks: unused}
training:
  batch_size: 5
  seed: 7
  loss: bce_dice
  metrics: [mean_iou]
  optimizer: {type: SGD, learning_rate: 0.1, momentum: 0.9, nesterov: true}
)";

}  // namespace

std::string tiny_config(bool synchronized) {
  return std::string(R"(
model:
  name: tiny
  layers:
    - {name: in, type: Input, shape: [16, 16, 3]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: relu}
    - {name: bn1, type: BatchNormalization, synchronized: )") +
         (synchronized ? "true" : "false") + R"(}
    - {name: p1, type: MaxPooling2D}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {name: u1, type: Conv2DTranspose, filters: 4, kernel_size: 2, strides: 2, padding: same}
    - {name: cat, type: Concatenate, inputs: [u1, bn1]}
    - {name: drop, type: Dropout, rate: 0.2}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
)" + kTinyTraining;
}

std::string tiny_frozen_config(bool frozen) {
  const std::string f = frozen ? "false" : "true";
  return R"(
model:
  name: tiny_frozen
  layers:
    - {name: in, type: Input, shape: [16, 16, 3]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: relu}
    - {name: bn1, type: BatchNormalization, synchronized: true, trainable: false}
    - {name: p1, type: MaxPooling2D}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same, trainable: )" + f + R"(}
    - {name: a2, type: PReLU, shared_axes: [1, 2], alpha_initializer: glorot_uniform, trainable: )" + f + R"(}
    - {name: s2, type: SeparableConv2D, filters: 8, kernel_size: 3, padding: same, trainable: )" + f + R"(}
    - {name: d2, type: DepthwiseConv2D, kernel_size: 3, padding: same, activation: gelu, trainable: )" + f + R"(}
    - {name: u1, type: Conv2DTranspose, filters: 4, kernel_size: 2, strides: 2, padding: same, trainable: )" + f + R"(}
    - {name: cat, type: Concatenate, inputs: [u1, bn1]}
    - {name: gn, type: GroupNormalization, groups: 2, trainable: )" + f + R"(}
    - {name: ln, type: LayerNormalization, trainable: )" + f + R"(}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
)" + std::string(kTinyTraining);
}

std::string tiny_unet_config() {
  return R"(
model:
  name: tiny_unet
  layers:
    - {name: in, type: Input, shape: [16, 16, 3]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {name: c1b, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {name: p1, type: MaxPooling2D}
    - {name: c2, type: Conv2D, filters: 16, kernel_size: 3, padding: same, activation: relu}
    - {name: u1, type: Conv2DTranspose, filters: 8, kernel_size: 2, strides: 2, padding: same}
    - {name: cat, type: Concatenate, inputs: [u1, c1b]}
    - {name: c3, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
)" + std::string(kTinyTraining);
}

std::string tiny_se_config() {
  return R"(
model:
  name: tiny_se
  layers:
    - {name: in, type: Input, shape: [16, 16, 3]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {name: squeeze, type: GlobalAveragePooling2D}
    - {name: shape, type: Reshape, target_shape: [1, 1, 8]}
    - {name: fc1, type: Dense, units: 2, activation: relu, kernel_initializer: he_normal, use_bias: false}
    - {name: fc2, type: Dense, units: 8, activation: sigmoid, use_bias: false}
    - {name: excite, type: Multiply, inputs: [c1, fc2]}
    - {name: peak, type: GlobalMaxPooling2D, keepdims: true}
    - {name: gate, type: Dense, units: 8, activation: sigmoid}
    - {name: attend, type: Multiply, inputs: [gate, excite]}
    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
)" + std::string(kTinyTraining);
}

Dataset tiny_data() {
  Dataset d;
  const int n = 13;
  d.images.resize(Shape{n, 16, 16, 3});
  d.masks.resize(Shape{n, 16, 16, 1});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.f, 255.f);
  for (size_t i = 0; i < d.images.numel(); ++i) d.images.data()[i] = u(rng);
  for (int s = 0; s < n; ++s) {
    d.names.push_back("s" + std::to_string(s));
    for (int y = 0; y < 16; ++y)
      for (int x = 0; x < 16; ++x)
        d.masks.sample(s)[y * 16 + x] = std::hypot(x - 4 - s % 8, y - 8) < 4 ? 1.f : 0.f;
  }
  return d;
}

std::string tiny_classes_config(int classes, const std::string& loss, const std::string& last_activation) {
  return R"(model:
  name: tiny_classes
  layers:
    - {name: in, type: Input, shape: [16, 16, 3]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 4, kernel_size: 3, padding: same, activation: relu}
    - {name: bn1, type: BatchNormalization, synchronized: true}
    - {name: p1, type: MaxPooling2D}
    - {name: c2, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {name: u1, type: Conv2DTranspose, filters: 4, kernel_size: 2, strides: 2, padding: same}
    - {name: cat, type: Concatenate, inputs: [u1, bn1]}
    - {name: out, type: Conv2D, filters: )" + std::to_string(classes) + R"(, kernel_size: 1, activation: )" +
         last_activation + R"(}
data: {images: unused, masks: unused}
training:
  batch_size: 5
  seed: 7
  loss: )" + loss + R"(
  metrics: [accuracy, mean_iou, dice]
  optimizer: {type: SGD, learning_rate: 0.1, momentum: 0.9, nesterov: true}
)";
}

Dataset tiny_class_data() {
  Dataset d = tiny_data();
  const Shape s = d.masks.shape();
  for (int i = 0; i < s.n; ++i) {
    cv::Mat mask(s.h, s.w, CV_32FC1, d.masks.sample(i)), mask8, labels;
    mask.convertTo(mask8, CV_8U, 255.0);
    connected_objects(mask8).convertTo(labels, CV_16U);
    boundary_classes(labels, 1).convertTo(mask, CV_32F);
  }
  return d;
}

Dataset tiny_ignored_class_data() {
  Dataset d = tiny_class_data();
  for (int s = 0; s < d.size(); ++s)
    for (int i = 0; i < (s % 4) * 40; ++i) d.masks.sample(s)[i] = kIgnoredPixel;
  return d;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / std::max(1.0, std::abs(double(b[i]))));
  return worst;
}

void check_towers_reach_one_tower(const Config& config, const Dataset& data) {
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}, {3, 9}};
  auto train = [&](int towers) {
    Trainer t(config, towers, 1);
    for (const auto& b : batches) t.train_step(data, b);
    for (int r = 1; r < towers; ++r) REQUIRE(t.params(r) == t.params(0));
    return t.params(0);
  };
  const std::vector<float> start = Trainer(config, 1, 1).params(0), one = train(1), two = train(2),
                           three = train(3);
  REQUIRE(max_rel_diff(start, one) > 1e-3);  // training moved the weights
  CHECK(max_rel_diff(two, one) < 2e-5);
  CHECK(max_rel_diff(three, one) < 2e-5);
}

}  // namespace trainer::testing
