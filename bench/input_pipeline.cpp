// Per-core speed of the input pipeline's stages, in images/s on one thread,
// and the cores they take to feed N GPUs. For each input size (128 and 256
// px, RGB): decoding a file into a held uint8 sample (data/image_decode.h:
// OpenCV's decoder, then the resize to the input size), and Trainer::gather's
// copy of a held uint8 sample and its uint8 mask into float32
// (data/training_sample.h): plain, with a flip (data.augmentation's
// horizontal_flip), with a quarter turn (rotate_90), with Keras's affine
// transform (rotation_range 20, zoom_range 0.1), with brightness_range
// [0.8, 1.2], and with all of them (a quarter turn and the affine transform
// as one warp in uint8, then the conversion with the brightness). OpenCV's own thread pool is off
// (cv::setNumThreads(0)), as in trainer, so each figure is one core's.
//   input_pipeline [--images DIR] [--gpus 8] [--rate 1250] [--seconds 1]
// --rate is what each GPU trains, in images/s (1,250: the seed U-Net in bf16
// on one H200, docs/gpu.md). The last columns give the cores a run needs at
// that rate with every augmentation on: with the data held in memory, and
// decoded per step (multi-process runs, docs/multi_node.md: decoding too).
#include <CLI/CLI.hpp>
#include <opencv2/core.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/affine_augmentation.h"
#include "data/augmentation.h"
#include "data/training_sample.h"
#include "data/image_decode.h"
#include "data/image_files.h"

using namespace trainer;

namespace {

/// Calls f(i) for i = 0, 1, ... for about `seconds` (at least 3 calls) and
/// returns the calls per second.
double rate(double seconds, const std::function<void(size_t)>& f) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  size_t n = 0;
  double elapsed = 0;
  while (n < 3 || elapsed < seconds) {
    f(n++);
    elapsed = std::chrono::duration<double>(clock::now() - t0).count();
  }
  return double(n) / elapsed;
}

/// The stages' rates (images/s on one core) at one input size; every rate
/// but decode's is the gather's copy of an image and its mask with (or
/// without) that augmentation.
struct Rates {
  double decode = 0, gather = 0, flip = 0, turn = 0, affine = 0, brightness = 0, all = 0;
};

Rates measure(const std::vector<std::string>& files, int size, double seconds) {
  const int c = 3, count = int(files.size());
  const size_t n = size_t(size) * size_t(size) * c;
  // Held as a Dataset holds 8-bit files (data/held_samples.h); decoding into it as decode_into does.
  Tensor held;
  held.set_dtype(DType::U8);
  held.resize(Shape{count, size, size, c});
  const auto decode = [&](int i) {
    const cv::Mat pixels = decode_image_pixels(files[size_t(i)], size, size, c).pixels;
    pixels.copyTo(cv::Mat(size, size, CV_8UC(c), held.raw_sample(i)));
  };
  for (int i = 0; i < count; ++i) decode(i);
  Tensor masks;
  masks.set_dtype(DType::U8);
  masks.resize(Shape{count, size, size, 1});
  cv::Mat(count * size, size, CV_8UC1, masks.raw_sample(0)).setTo(1);
  std::vector<float> out(n), mask(size_t(size) * size_t(size));
  // Trainer::gather's copy of sample i with cfg's augmentations drawn for step i, symmetry s.
  const auto copy = [&](size_t i, const AugmentationConfig& cfg, Symmetry s) {
    SampleAugmentation a;
    a.symmetry = s;
    a.warp = cfg.affine();
    if (cfg.affine() || cfg.brightness()) a.draw = draw_affine(cfg, 1, i, 0, size, size);
    augmented_sample_to_float(cfg, a, held, &masks, int(i % size_t(count)), out.data(), mask.data());
  };
  AugmentationConfig none, affine, bright, both;
  affine.rotation_range = both.rotation_range = 20;
  affine.zoom_low = both.zoom_low = 0.9, affine.zoom_high = both.zoom_high = 1.1;
  bright.brightness_low = both.brightness_low = 0.8, bright.brightness_high = both.brightness_high = 1.2;
  Rates r;
  r.decode = rate(seconds, [&](size_t i) { decode(int(i % size_t(count))); });
  r.gather = rate(seconds, [&](size_t i) { copy(i, none, 0); });
  r.flip = rate(seconds, [&](size_t i) { copy(i, none, 1); });
  r.turn = rate(seconds, [&](size_t i) { copy(i, none, 5); });
  r.affine = rate(seconds, [&](size_t i) { copy(i, affine, 0); });
  r.brightness = rate(seconds, [&](size_t i) { copy(i, bright, 0); });
  r.all = rate(seconds, [&](size_t i) { copy(i, both, 5); });
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Per-core images/s of the input pipeline's stages, and the cores to feed N GPUs"};
  std::string images = "data/sample/images";
  int gpus = 8;
  double per_gpu = 1250, seconds = 1;
  app.add_option("--images", images, "Folder of image files to decode (PNG/JPEG/TIFF)")->capture_default_str();
  app.add_option("--gpus", gpus, "GPUs to feed")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--rate", per_gpu, "Images/s each GPU trains")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seconds", seconds, "Seconds per measurement")->check(CLI::PositiveNumber)->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    cv::setNumThreads(0);  // one core per figure, as trainer runs OpenCV on its own threads
    const std::vector<std::string> files = images_in_folder(images, "--images");
    const double need = gpus * per_gpu;
    std::printf("images/s on one core (%zu files of %s), and cores for %d GPUs at %.0f images/s each\n",
                files.size(), images.c_str(), gpus, per_gpu);
    std::printf("%6s %8s %8s %8s %8s %8s %11s %8s %11s %13s\n", "size", "decode", "gather", "flip", "turn90",
                "affine", "brightness", "all", "cores held", "cores decoded");
    for (int size : {128, 256}) {
      const Rates r = measure(files, size, seconds);
      std::printf("%6d %8.0f %8.0f %8.0f %8.0f %8.0f %11.0f %8.0f %11.1f %13.1f\n", size, r.decode, r.gather, r.flip,
                  r.turn, r.affine, r.brightness, r.all, need / r.all, need * (1 / r.all + 1 / r.decode));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
