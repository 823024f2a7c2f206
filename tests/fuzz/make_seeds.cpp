// Writes the seed corpora of the checkpoint and image/mask pair harnesses
// (tests/fuzz/README.md): small files of every kind the readers take, made
// with the project's own writers (save_checkpoint) and OpenCV's encoders.
//   build-fuzz/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace fs = std::filesystem;

namespace {

/// A checkpoint of a two-layer model: weights alone, or with what --resume reads.
trainer::Checkpoint tiny_checkpoint(bool resumable) {
  trainer::Checkpoint c;
  c.config_yaml =
      "model:\n  layers:\n    - {name: in, type: Input, shape: [8, 8, 1]}\n"
      "    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}\n"
      "data: {images: i, masks: m}\n";
  c.epoch = 2;
  c.logs = {{"loss", 0.5}, {"val_loss", 0.6}, {"dice", 0.25}};
  c.weights = {{"out", "kernel", {1, 1, 1, 1}, {0.5f}}, {"out", "bias", {1}, {-0.1f}}};
  if (resumable) {
    c.state_scalars = {{"optimizer_iterations", 20}, {"epoch_in_run", 2}};
    c.state_arrays = {{"optimizer_m", {0.1f, 0.2f}}, {"optimizer_v", {0.01f, 0.02f}}};
    c.state_double_arrays = {{"counts", {1, 2, 3, 4}}};
  }
  return c;
}

/// An 8-bit pattern of `size` with `channels` channels: a gradient and two discs.
cv::Mat pattern(cv::Size size, int channels) {
  cv::Mat m(size, CV_8UC(channels));
  for (int y = 0; y < size.height; ++y)
    for (int x = 0; x < size.width; ++x)
      for (int c = 0; c < channels; ++c) m.ptr<uint8_t>(y)[x * channels + c] = uint8_t((x * 7 + y * 3 + c * 40) & 255);
  cv::circle(m, {size.width / 3, size.height / 3}, size.width / 5, cv::Scalar::all(255), -1);
  cv::circle(m, {2 * size.width / 3, 2 * size.height / 3}, size.width / 6, cv::Scalar::all(30), -1);
  return m;
}

/// A mask of `size`: the pattern's discs as `on`, the rest 0.
cv::Mat disc_mask(cv::Size size, int on, int depth = CV_8U) {
  cv::Mat m = cv::Mat::zeros(size, CV_MAKETYPE(depth, 1));
  cv::circle(m, {size.width / 3, size.height / 3}, size.width / 5, cv::Scalar::all(on), -1);
  cv::circle(m, {2 * size.width / 3, 2 * size.height / 3}, size.width / 6, cv::Scalar::all(on > 2 ? on : 1), -1);
  return m;
}

std::vector<uchar> encode(const std::string& ext, const cv::Mat& m) {
  std::vector<uchar> bytes;
  if (!cv::imencode(ext, m, bytes)) throw std::runtime_error("cannot encode " + ext);
  return bytes;
}

/// The image/mask harness's input: options, the image's length, the image, the mask.
void write_pair(const fs::path& file, uint8_t options, const std::vector<uchar>& image,
                const std::vector<uchar>& mask) {
  std::ofstream out(file, std::ios::binary);
  const uint32_t n = uint32_t(image.size());
  out.put(char(options));
  out.write(reinterpret_cast<const char*>(&n), 4);  // little-endian on the x86-64 and arm64 hosts this runs on
  out.write(reinterpret_cast<const char*>(image.data()), std::streamsize(image.size()));
  out.write(reinterpret_cast<const char*>(mask.data()), std::streamsize(mask.size()));
}

void image_pair_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  const cv::Size s(24, 16);
  cv::Mat rgba;
  cv::cvtColor(pattern(s, 3), rgba, cv::COLOR_BGR2BGRA);
  cv::Mat rgb16;
  pattern(s, 3).convertTo(rgb16, CV_16U, 257);
  write_pair(dir / "gray_png", 0, encode(".png", pattern(s, 1)), encode(".png", disc_mask(s, 255)));
  write_pair(dir / "rgb_png", 4 | 1, encode(".png", pattern(s, 3)), encode(".png", disc_mask(s, 255)));
  write_pair(dir / "rgba_png_native", 4 | 16, encode(".png", rgba), encode(".png", disc_mask(s, 1)));
  write_pair(dir / "rgb16_png", 4, encode(".png", rgb16), encode(".png", disc_mask(s, 65535, CV_16U)));
  // Bits 5-6 name the files .jpg (32), .tif (64) or .bmp (96), as the extension of the image's format.
  write_pair(dir / "jpeg", 32 | 4 | 2, encode(".jpg", pattern(s, 3)), encode(".png", disc_mask(s, 255)));
  write_pair(dir / "tiff", 64 | 4, encode(".tif", pattern(s, 3)), encode(".tif", disc_mask(s, 255)));
  write_pair(dir / "bmp", 96 | 1, encode(".bmp", pattern(s, 1)), encode(".bmp", disc_mask(s, 255)));
  write_pair(dir / "classes_png", 4 | 8, encode(".png", pattern(s, 3)), encode(".png", disc_mask(s, 2)));
  write_pair(dir / "mask_of_other_size", 0, encode(".png", pattern(s, 1)),
             encode(".png", disc_mask(cv::Size(16, 16), 255)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus folder>\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  fs::create_directories(root / "checkpoint");
  trainer::save_checkpoint((root / "checkpoint" / "weights.h5").string(), tiny_checkpoint(false));
  trainer::save_checkpoint((root / "checkpoint" / "resumable.h5").string(), tiny_checkpoint(true));
  image_pair_seeds(root / "image_pair");
  return 0;
}
