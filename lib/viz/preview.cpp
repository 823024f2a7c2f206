#include "viz/preview.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"
#include "data/image_decode.h"
#include "train/load_model.h"
#include "viz/overlay.h"
#include "viz/text.h"

namespace trainer::viz {

namespace fs = std::filesystem;

namespace {

const cv::Scalar kBackground(40, 40, 40), kCaption(230, 230, 230), kMaskColour(0, 255, 0),
    kPredictionColour(255, 0, 255);
const Font kCaptionFont{0.4, 1};

void check_options(const PreviewOptions& o) {
  if (o.count < 1) throw UserError("--count " + std::to_string(o.count) + ": must be at least 1");
  if (o.size < 32 || o.size > 2048) throw UserError("--size " + std::to_string(o.size) + ": must be in 32..2048");
  if (!(o.threshold > 0 && o.threshold < 1)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", o.threshold);
    throw UserError("--threshold " + std::string(value) + ": must be in (0, 1), e.g. 0.5");
  }
  const auto check_folder = [](const char* flag, const std::string& dir, const char* what) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      throw UserError(std::string(flag) + ": '" + dir + "' " + (fs::exists(dir, ec) ? "is not a folder" : "does not exist") +
                      "; pass the folder of " + what);
  };
  check_folder("--images", o.images_dir, "images");
  check_folder("--masks", o.masks_dir, "masks");
}

// The first `count` pairs, matched as the trainer matches them.
std::vector<ImagePair> first_pairs(const PreviewOptions& o) {
  DataOptions d;
  d.images_dir = o.images_dir;
  d.masks_dir = o.masks_dir;
  d.mask_suffix = o.mask_suffix;
  std::vector<ImagePair> pairs;
  try {
    pairs = find_image_pairs(d);
  } catch (const UserError& e) {
    throw UserError(std::string(e.what()) +
                    " (here data.images, data.masks and data.mask_suffix are --images, --masks and --mask-suffix)");
  }
  if (pairs.size() > size_t(o.count)) pairs.resize(size_t(o.count));
  return pairs;
}

// 8-bit BGR [h, w] from RGB float32 [h, w, 3] in [0, 255] (rounded, as cv::Mat::convertTo).
cv::Mat to_bgr8(const std::vector<float>& rgb, int h, int w) {
  cv::Mat f(h, w, CV_32FC3, const_cast<float*>(rgb.data())), out;
  f.convertTo(out, CV_8UC3);
  cv::cvtColor(out, out, cv::COLOR_RGB2BGR);
  return out;
}

// The image of path, letterboxed into a size x size panel (black bars); fit gets its rectangle.
cv::Mat image_panel(const std::string& path, int size, cv::Rect& fit) {
  float probe[3];
  fit = letterbox_rect(decode_image(path, 1, 1, 3, probe), size);  // the file's own size
  std::vector<float> rgb(size_t(fit.width) * fit.height * 3);
  decode_image(path, fit.height, fit.width, 3, rgb.data());
  cv::Mat panel(size, size, CV_8UC3, cv::Scalar(0, 0, 0));
  to_bgr8(rgb, fit.height, fit.width).copyTo(panel(fit));
  return panel;
}

// The mask of path decoded at fit's size (0/1 as the trainer binarises), placed in a size x size 0/255 mask.
cv::Mat mask_panel(const std::string& path, int size, const cv::Rect& fit) {
  std::vector<float> m(size_t(fit.width) * fit.height);
  decode_mask(path, fit.height, fit.width, m.data());
  cv::Mat out(size, size, CV_8UC1, cv::Scalar(0));
  cv::Mat(fit.height, fit.width, CV_32FC1, m.data()).convertTo(out(fit), CV_8UC1, 255.0);
  return out;
}

// Predictions of the pairs' images: probabilities [n, H, W, 1] and, per image,
// the IoU of the thresholded prediction with its mask at the model's input size.
struct Predictions {
  Tensor probs;
  std::vector<double> iou;
};

Predictions predict(const PreviewOptions& o, const std::vector<ImagePair>& pairs) {
  const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  DevicePlan cpu;
  cpu.cpu_towers = 1;
  LoadedModel m = load_model(o.checkpoint, cpu, threads);
  if (m.trainer->classes() > 0)
    throw UserError("--checkpoint '" + o.checkpoint + "' is a model of " + std::to_string(m.trainer->classes()) +
                    " classes; preview shows the predictions of one-channel (sigmoid) models. Look at its "
                    "predictions with trainer predict --overlay instead");
  const Shape in = m.trainer->model().input_shape();
  const int n = int(pairs.size());
  Tensor images(Shape{n, in.h, in.w, in.c});
  Tensor masks(Shape{n, in.h, in.w, 1});
  for (int i = 0; i < n; ++i) {
    decode_image(pairs[size_t(i)].image, in.h, in.w, in.c, images.sample(i));
    decode_mask(pairs[size_t(i)].mask, in.h, in.w, masks.sample(i));
  }
  Predictions p;
  p.probs = m.trainer->predict(images, std::max(1, m.config->training.batch_size));
  const size_t pixels = size_t(in.h) * in.w;
  for (int i = 0; i < n; ++i) {
    size_t inter = 0, uni = 0;
    for (size_t k = 0; k < pixels; ++k) {
      const bool pred = p.probs.sample(i)[k] > o.threshold, truth = masks.sample(i)[k] > 0.5f;
      inter += pred && truth;
      uni += pred || truth;
    }
    p.iou.push_back(uni ? double(inter) / double(uni) : 1.0);
  }
  return p;
}

// The thresholded probability map of sample i, resized bilinearly into fit of a size x size 0/255 mask.
cv::Mat prediction_panel(const Tensor& probs, int i, double threshold, int size, const cv::Rect& fit) {
  const Shape s = probs.shape();
  cv::Mat prob(s.h, s.w, CV_32FC1, const_cast<float*>(probs.sample(i))), resized;
  cv::resize(prob, resized, fit.size(), 0, 0, cv::INTER_LINEAR);
  cv::Mat out(size, size, CV_8UC1, cv::Scalar(0));
  cv::Mat(resized > threshold).copyTo(out(fit));
  return out;
}

void caption(cv::Mat& grid, const cv::Rect& strip, const std::string& text) {
  draw_text(grid, text, {strip.x + 2, strip.y + 14}, strip.width - 4, kCaptionFont, kCaption);
}

}  // namespace

cv::Size PreviewLayout::grid() const {
  const int tile_w = panels * size + (panels - 1) * kPreviewGap;
  return {cols * tile_w + (cols + 1) * kPreviewGap, rows * (size + kPreviewCaption) + (rows + 1) * kPreviewGap};
}

cv::Rect PreviewLayout::panel(int i, int p) const {
  const int tile_w = panels * size + (panels - 1) * kPreviewGap;
  const int x = kPreviewGap + (i % cols) * (tile_w + kPreviewGap) + p * (size + kPreviewGap);
  const int y = kPreviewGap + (i / cols) * (size + kPreviewCaption + kPreviewGap);
  return {x, y, size, size};
}

cv::Rect PreviewLayout::caption(int i, int p) const {
  const cv::Rect r = panel(i, p);
  return {r.x, r.y + size, size, kPreviewCaption};
}

PreviewLayout preview_layout(int n, int panels, int size) {
  if (n < 1 || (panels != 1 && panels != 2) || size < 1)
    throw InternalError("preview_layout: needs n >= 1, panels 1 or 2, size >= 1");
  PreviewLayout l;
  l.n = n;
  l.panels = panels;
  l.size = size;
  l.cols = int(std::ceil(std::sqrt(double(n)) - 1e-9));
  l.rows = (n + l.cols - 1) / l.cols;
  return l;
}

cv::Rect letterbox_rect(cv::Size image_size, int size) {
  const double scale = double(size) / std::max(image_size.width, image_size.height);
  const int w = std::clamp(int(std::lround(image_size.width * scale)), 1, size);
  const int h = std::clamp(int(std::lround(image_size.height * scale)), 1, size);
  return {(size - w) / 2, (size - h) / 2, w, h};
}

cv::Mat render_preview(const PreviewOptions& o) {
  check_options(o);
  const std::vector<ImagePair> pairs = first_pairs(o);
  const bool with_predictions = !o.checkpoint.empty();
  Predictions pred;
  if (with_predictions) pred = predict(o, pairs);

  const PreviewLayout layout = preview_layout(int(pairs.size()), with_predictions ? 2 : 1, o.size);
  cv::Mat grid(layout.grid(), CV_8UC3, kBackground);
  for (int i = 0; i < layout.n; ++i) {
    const ImagePair& pair = pairs[size_t(i)];
    cv::Rect fit;
    const cv::Mat raw = image_panel(pair.image, o.size, fit);
    cv::Mat with_mask = raw.clone();
    overlay_mask(with_mask, mask_panel(pair.mask, o.size, fit), kMaskColour);
    with_mask.copyTo(grid(layout.panel(i, 0)));
    caption(grid, layout.caption(i, 0), fs::path(pair.image).stem().string());
    if (!with_predictions) continue;
    cv::Mat with_pred = raw.clone();
    overlay_mask(with_pred, prediction_panel(pred.probs, i, o.threshold, o.size, fit), kPredictionColour);
    with_pred.copyTo(grid(layout.panel(i, 1)));
    char text[64];
    std::snprintf(text, sizeof text, "prediction, IoU %.2f", pred.iou[size_t(i)]);
    caption(grid, layout.caption(i, 1), text);
  }
  return grid;
}

}  // namespace trainer::viz
