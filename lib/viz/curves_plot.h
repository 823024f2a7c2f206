#pragma once
// The picture of a training log: losses and metrics per epoch, side by side.
#include <opencv2/core.hpp>
#include <string>

#include "train/training_log.h"

namespace trainer::viz {

/// Size of the picture: a title strip over two panels side by side.
constexpr int kCurvesPanelWidth = 640, kCurvesPanelHeight = 480, kCurvesTitleHeight = 36;
constexpr int kCurvesWidth = 2 * kCurvesPanelWidth, kCurvesHeight = kCurvesTitleHeight + kCurvesPanelHeight;

/// Draws log as an 8-bit BGR image of kCurvesWidth x kCurvesHeight pixels
/// (1280 x 516) on white: `title` centred on top; the left panel
/// [0, 640) x [36, 516) plots the columns "loss" and "val_loss", the right
/// panel [640, 1280) every other column but "learning_rate". x is the epoch + 1 (the trainer's
/// "Epoch k/N" numbering). A column and its "val_" twin share a colour
/// (tab10 palette, in order of first appearance); the val_ line is dashed.
/// Missing values break the line. A panel without columns says so in its plot area.
cv::Mat plot_training_curves(const TrainingLog& log, const std::string& title);

}  // namespace trainer::viz
