#include "train/predict.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "data/image_decode.h"
#include "io/atomic_file.h"
#include "train/tta.h"

namespace trainer {

namespace fs = std::filesystem;

ModelImages decode_for_model(const std::vector<std::string>& paths, const Shape& input) {
  ModelImages m;
  m.images = Tensor(input.with_batch(int(paths.size())));
  m.sizes.reserve(paths.size());
  for (size_t i = 0; i < paths.size(); ++i)
    m.sizes.push_back(decode_image(paths[i], input.h, input.w, input.c, m.images.sample(int(i))));
  return m;
}

cv::Mat probability_map(const Tensor& probs, int i, cv::Size size) {
  const Shape s = probs.shape();
  const cv::Mat model_size(s.h, s.w, CV_32FC1, const_cast<float*>(probs.sample(i)));
  cv::Mat out;
  if (model_size.size() == size)
    out = model_size.clone();
  else
    cv::resize(model_size, out, size, 0, 0, cv::INTER_LINEAR);
  return out;
}

cv::Mat threshold_map(const cv::Mat& prob, double threshold) { return prob > threshold; }

void check_threshold(double threshold, const std::string& flag) {
  if (!(threshold > 0.0 && threshold < 1.0)) {  // NaN fails too
    std::ostringstream value;
    value << threshold;
    throw UserError(flag + " " + value.str() + " is outside (0, 1); pass a probability such as 0.5");
  }
}

namespace {

// The image as 8-bit BGR (16-bit scaled down) with the contours of mask drawn in green.
cv::Mat overlay_image(const std::string& path, const cv::Mat& mask) {
  cv::Mat image = cv::imread(path, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  if (image.size() != mask.size())
    throw UserError("cannot decode '" + path + "' again for its overlay (the file changed during the run)");
  std::vector<std::vector<cv::Point>> contours;
  cv::findContours(mask, contours, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
  cv::drawContours(image, contours, -1, cv::Scalar(0, 255, 0), 1);
  return image;
}

// The files written per image, <stem><suffix> (see predict_files).
constexpr const char* kMaskSuffix = "_mask.png";
constexpr const char* kProbSuffix = "_prob.png";
constexpr const char* kProbTiffSuffix = "_prob.tif";
constexpr const char* kOverlaySuffix = "_overlay.png";

// The files write_outputs writes for the image at path.
std::vector<std::string> output_files(const std::string& path, const PredictOptions& o) {
  const std::string base = (fs::path(o.output_dir) / fs::path(path).stem()).string();
  std::vector<std::string> files = {base + kMaskSuffix};
  if (o.probabilities) files.push_back(base + (o.probability_format == "tiff" ? kProbTiffSuffix : kProbSuffix));
  if (o.overlay) files.push_back(base + kOverlaySuffix);
  return files;
}

// Without --overwrite, no existing file is replaced: a training mask folder
// holds the same <stem>_mask.png names, and its masks would be lost.
void check_no_overwrite(const std::vector<std::string>& paths, const PredictOptions& o) {
  if (o.overwrite) return;
  std::error_code ec;
  std::string first;
  size_t n = 0;
  for (const auto& p : paths)
    for (const auto& f : output_files(p, o))
      if (fs::exists(f, ec) && n++ == 0) first = f;
  if (n)
    throw UserError("'" + first + "'" +
                    (n > 1 ? " and " + std::to_string(n - 1) + " more output file(s) exist" : " exists") +
                    "; predict replaces no file without --overwrite (in a training mask folder it would replace the "
                    "masks, which have the same <stem>_mask.png names): choose another --output, or pass --overwrite "
                    "to replace them");
}

// Writes the outputs of one image; appends the files to written.
void write_outputs(const std::string& path, const cv::Mat& prob, const PredictOptions& o,
                   std::vector<std::string>& written) {
  const std::vector<std::string> files = output_files(path, o);  // mask, then probabilities, then overlay
  const cv::Mat mask = threshold_map(prob, o.threshold);
  size_t next = 0;
  written.push_back(files[next++]);
  write_png_atomic(written.back(), mask);
  if (o.probabilities) {
    written.push_back(files[next++]);
    if (o.probability_format == "tiff") {
      write_tiff_atomic(written.back(), prob);  // float32, as computed
    } else {
      cv::Mat p8;
      prob.convertTo(p8, CV_8U, 255.0);  // saturate_cast rounds to nearest
      write_png_atomic(written.back(), p8);
    }
  }
  if (o.overlay) {
    written.push_back(files[next++]);
    write_png_atomic(written.back(), overlay_image(path, mask));
  }
}

// Two inputs with one stem would write the same output files.
void check_stems(const std::vector<std::string>& paths) {
  std::map<std::string, std::string> by_stem;
  for (const auto& p : paths) {
    auto [it, inserted] = by_stem.emplace(fs::path(p).stem().string(), p);
    if (!inserted)
      throw UserError("'" + it->second + "' and '" + p + "' would write the same output files (<stem>_mask.png); "
                      "rename one or predict them separately");
  }
}

}  // namespace

std::vector<std::string> without_prediction_outputs(const std::vector<std::string>& paths,
                                                    const std::string& output_dir) {
  auto resolved = [](const fs::path& p) {
    std::error_code ec;
    const fs::path r = fs::weakly_canonical(p, ec);
    return ec ? fs::absolute(p).lexically_normal() : r;
  };
  const fs::path out = resolved(output_dir);
  std::set<fs::path> outputs;
  for (const auto& p : paths)
    for (const char* suffix : {kMaskSuffix, kProbSuffix, kProbTiffSuffix, kOverlaySuffix})
      outputs.insert(out / (fs::path(p).stem().string() + suffix));
  std::vector<std::string> kept;
  for (const auto& p : paths)
    if (!outputs.count(resolved(p))) kept.push_back(p);
  if (kept.size() < paths.size())
    spdlog::info("leaving out {} file(s) that this prediction writes itself in '{}' (<stem>_mask.png and the like "
                 "of another input)",
                 paths.size() - kept.size(), output_dir);
  return kept;
}

std::vector<std::string> predict_files(Trainer& trainer, const std::vector<std::string>& paths,
                                       const PredictOptions& options) {
  check_threshold(options.threshold, "--threshold");
  if (options.batch_size < 1) throw UserError("--batch-size must be at least 1");
  check_stems(paths);
  check_no_overwrite(paths, options);
  std::error_code ec;
  const bool created = fs::create_directories(options.output_dir, ec);
  if (ec || !fs::is_directory(options.output_dir, ec))
    throw UserError("cannot create output folder '" + options.output_dir + "'" +
                    (ec ? ": " + ec.message() : std::string()) + "; pass a writable --output folder");

  const Shape input = trainer.model().input_shape();
  if (options.tta) log_tta(input);
  std::vector<std::string> written;
  const size_t n = paths.size();
  try {
    for (size_t lo = 0; lo < n; lo += size_t(options.batch_size)) {
      const std::vector<std::string> chunk(paths.begin() + long(lo),
                                           paths.begin() + long(std::min(n, lo + size_t(options.batch_size))));
      const ModelImages m = decode_for_model(chunk, input);
      const Tensor probs = options.tta ? predict_tta(trainer, m.images, options.batch_size)
                                       : trainer.predict(m.images, options.batch_size);
      for (size_t i = 0; i < chunk.size(); ++i)
        write_outputs(chunk[i], probability_map(probs, int(i), m.sizes[i]), options, written);
      spdlog::info("predicted {}/{} image(s)", lo + chunk.size(), n);
    }
  } catch (...) {
    // An image that cannot be decoded before anything was written: no empty folder left behind.
    if (created && fs::is_empty(options.output_dir, ec)) fs::remove(options.output_dir, ec);
    throw;
  }
  return written;
}

}  // namespace trainer
