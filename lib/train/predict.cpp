#include "train/predict.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "data/boundary_objects.h"
#include "data/image_decode.h"
#include "data/instances.h"
#include "backend/train_math.h"
#include "io/atomic_file.h"
#include "io/folder_lock.h"
#include "train/tiled_predict.h"
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
  const cv::Mat model_size(s.h, s.w, CV_32FC(s.c), const_cast<float*>(probs.sample(i)));
  cv::Mat out;
  if (model_size.size() == size)
    out = model_size.clone();
  else
    cv::resize(model_size, out, size, 0, 0, cv::INTER_LINEAR);
  return out;
}

cv::Mat threshold_map(const cv::Mat& prob, double threshold) { return prob > threshold; }

cv::Mat predicted_instances(const cv::Mat& mask, int classes, const InstanceSplit& split) {
  if (classes == 0) return split_instances(mask, split);
  if (classes == 3) return boundary_objects(mask);
  throw InternalError("predicted_instances: a model of " + std::to_string(classes) + " classes");
}

cv::Mat class_map(const cv::Mat& prob) {
  const int k = prob.channels();
  cv::Mat classes(prob.size(), CV_8UC1);
  for (int r = 0; r < prob.rows; ++r) {
    const float* p = prob.ptr<float>(r);
    uint8_t* c = classes.ptr<uint8_t>(r);
    for (int x = 0; x < prob.cols; ++x) c[x] = uint8_t(argmax_class(p + size_t(x) * size_t(k), k));
  }
  return classes;
}

void check_threshold(double threshold, const std::string& flag) {
  if (!(threshold > 0.0 && threshold < 1.0)) {  // NaN fails too
    std::ostringstream value;
    value << threshold;
    throw UserError(flag + " " + value.str() + " is outside (0, 1); pass a probability such as 0.5");
  }
}

namespace {

// Contour colours (BGR) of the classes 1, 2, ... of a categorical overlay, in turn;
// a binary overlay draws the first (green).
const cv::Scalar kClassColours[] = {{0, 255, 0},   {0, 0, 255},   {255, 0, 0},   {0, 255, 255},
                                    {255, 0, 255}, {255, 255, 0}, {0, 128, 255}, {255, 0, 128}};

// The image as 8-bit BGR (16-bit scaled down) with the contours of each
// foreground class of mask drawn (class c in kClassColours[(c - 1) % 8]); a
// binary mask (0/255) draws its 255 region in green.
cv::Mat overlay_image(const std::string& path, const cv::Mat& mask, int classes) {
  cv::Mat image = cv::imread(path, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  if (image.size() != mask.size())
    throw UserError("cannot decode '" + path + "' again for its overlay (the file changed during the run)");
  const int first = classes > 0 ? 1 : 255, last = classes > 0 ? classes - 1 : 255;
  std::vector<bool> present(256, false);  // the classes in mask: the others have no contour to find
  for (int r = 0; r < mask.rows; ++r)
    for (int x = 0; x < mask.cols; ++x) present[mask.at<uint8_t>(r, x)] = true;
  for (int c = first; c <= last; ++c) {
    if (!present[size_t(c)]) continue;
    std::vector<std::vector<cv::Point>> contours;
    cv::findContours(mask == c, contours, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
    const size_t colours = sizeof(kClassColours) / sizeof(kClassColours[0]);
    cv::drawContours(image, contours, -1, kClassColours[size_t(classes > 0 ? c - 1 : 0) % colours], 1);
  }
  return image;
}

// The files written per image, <stem><suffix> (see predict_files); a
// categorical model's probabilities are <stem>_prob_<class><ext>.
constexpr const char* kMaskSuffix = "_mask.png";
constexpr const char* kProbSuffix = "_prob.png";
constexpr const char* kProbTiffSuffix = "_prob.tif";
constexpr const char* kOverlaySuffix = "_overlay.png";
constexpr const char* kInstancesSuffix = "_instances.png";

// The files write_outputs writes for the image at path, for a model of
// `classes` classes (0: binary): mask, probabilities, overlay.
std::vector<std::string> output_files(const std::string& path, const PredictOptions& o, int classes) {
  const std::string base = (fs::path(o.output_dir) / fs::path(path).stem()).string();
  std::vector<std::string> files = {base + kMaskSuffix};
  const bool tiff = o.probability_format == "tiff";
  if (o.probabilities && classes == 0) files.push_back(base + (tiff ? kProbTiffSuffix : kProbSuffix));
  if (o.probabilities)
    for (int c = 0; c < classes; ++c) files.push_back(base + "_prob_" + std::to_string(c) + (tiff ? ".tif" : ".png"));
  if (o.overlay) files.push_back(base + kOverlaySuffix);
  if (o.instances) files.push_back(base + kInstancesSuffix);
  return files;
}

// Without --overwrite, no existing file is replaced: a training mask folder
// holds the same <stem>_mask.png names, and its masks would be lost.
void check_no_overwrite(const std::vector<std::string>& paths, const PredictOptions& o, int classes) {
  if (o.overwrite) return;
  std::error_code ec;
  std::string first;
  size_t n = 0;
  for (const auto& p : paths)
    for (const auto& f : output_files(p, o, classes))
      if (fs::exists(f, ec) && n++ == 0) first = f;
  if (n)
    throw UserError("'" + first + "'" +
                    (n > 1 ? " and " + std::to_string(n - 1) + " more output file(s) exist" : " exists") +
                    "; predict replaces no file without --overwrite (in a training mask folder it would replace the "
                    "masks, which have the same <stem>_mask.png names): choose another --output, or pass --overwrite "
                    "to replace them");
}

// What predict writes for one image, at its size: the mask and (with --probabilities) each class's probability
// map as its file stores it, filled band of rows by band of rows.
struct ImageOutputs {
  cv::Mat mask;                ///< CV_8UC1: 0/255, or class indices.
  std::vector<cv::Mat> probs;  ///< Per output channel: CV_8UC1 round(255 p) (png) or CV_32FC1 p (tiff).

  ImageOutputs(cv::Size size, int channels, const PredictOptions& o) : mask(size, CV_8UC1) {
    if (!o.probabilities) return;
    for (int c = 0; c < channels; ++c) probs.emplace_back(size, o.probability_format == "tiff" ? CV_32FC1 : CV_8UC1);
  }

  /// Rows [y0, y0 + rows.rows) from their probabilities (CV_32FC(K)).
  void put_rows(int y0, const cv::Mat& rows, const PredictOptions& o, int classes) {
    const cv::Range r(y0, y0 + rows.rows);
    const cv::Mat m = classes > 0 ? class_map(rows) : threshold_map(rows, o.threshold);
    m.copyTo(mask.rowRange(r));
    if (probs.empty()) return;
    std::vector<cv::Mat> planes;
    cv::split(rows, planes);
    for (size_t c = 0; c < planes.size(); ++c) {
      cv::Mat to = probs[c].rowRange(r);
      planes[c].convertTo(to, probs[c].type(), probs[c].depth() == CV_8U ? 255.0 : 1.0);  // saturate_cast rounds
    }
  }
};

// Labels (CV_32SC1, 0..N) as a 16-bit label image; UserError naming path beyond 65535 nuclei.
cv::Mat instance_image(const cv::Mat& labels, const std::string& path) {
  double n = 0;
  cv::minMaxLoc(labels, nullptr, &n);
  if (n > 65535)
    throw UserError("'" + path + "' holds " + fmt::format("{:g}", n) + " predicted nuclei, more than a 16-bit label "
                    "image (<stem>_instances.png) can number; predict it in parts (crop the image), or leave out "
                    "--instances and split <stem>_mask.png yourself");
  cv::Mat out;
  labels.convertTo(out, CV_16U);
  return out;
}

// Writes the outputs of the image at path (out: its mask and probabilities); appends the files to written.
void write_outputs(const std::string& path, const ImageOutputs& out, const PredictOptions& o, int classes,
                   std::vector<std::string>& written) {
  const std::vector<std::string> files = output_files(path, o, classes);  // mask, probabilities, overlay
  // The nuclei first: an image of too many is refused before any of its files is written.
  const cv::Mat instances = o.instances ? instance_image(predicted_instances(out.mask, classes, o.split), path) : cv::Mat();
  size_t next = 0;
  written.push_back(files[next++]);
  write_png_atomic(written.back(), out.mask);
  for (const cv::Mat& p : out.probs) {
    written.push_back(files[next++]);
    if (p.depth() == CV_32F)
      write_tiff_atomic(written.back(), p);  // float32, as computed
    else
      write_png_atomic(written.back(), p);
  }
  if (o.overlay) {
    written.push_back(files[next++]);
    write_png_atomic(written.back(), overlay_image(path, out.mask, classes));
  }
  if (o.instances) {
    written.push_back(files[next++]);
    write_png_atomic(written.back(), instances);
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

// Predicts paths at the model's input size, batch_size images at a time, and writes their outputs resized back.
void predict_resized_files(Trainer& trainer, const std::vector<std::string>& paths, const PredictOptions& o,
                           std::vector<std::string>& written) {
  const size_t n = paths.size();
  const int classes = trainer.classes();
  for (size_t lo = 0; lo < n; lo += size_t(o.batch_size)) {
    const std::vector<std::string> chunk(paths.begin() + long(lo), paths.begin() + long(std::min(n, lo + size_t(o.batch_size))));
    const ModelImages m = decode_for_model(chunk, trainer.model().input_shape());
    const Tensor probs = o.tta ? predict_tta(trainer, m.images, o.batch_size) : trainer.predict(m.images, o.batch_size);
    for (size_t i = 0; i < chunk.size(); ++i) {
      ImageOutputs out(m.sizes[i], probs.shape().c, o);
      out.put_rows(0, probability_map(probs, int(i), m.sizes[i]), o, classes);
      write_outputs(chunk[i], out, o, classes, written);
    }
    spdlog::info("predicted {}/{} image(s)", lo + chunk.size(), n);
  }
}

// The outputs of the image at path predicted at its own size in tiles (predict_tiled), filled band by band.
ImageOutputs tiled_outputs(Trainer& trainer, const std::string& path, const PredictOptions& o) {
  const cv::Mat pixels = decode_image_pixels(path, 0, 0, trainer.model().input_shape().c).pixels;
  ImageOutputs out(pixels.size(), trainer.model().output_shape().c, o);
  predict_tiled(trainer, pixels, TiledPrediction{*o.tiles, o.batch_size, o.tta},
                [&](int y0, const cv::Mat& rows) { out.put_rows(y0, rows, o, trainer.classes()); });
  return out;  // the pixels freed before the files are encoded
}

// Predicts each of paths at its own size in tiles and writes its outputs.
void predict_tiled_files(Trainer& trainer, const std::vector<std::string>& paths, const PredictOptions& o,
                         std::vector<std::string>& written) {
  for (size_t i = 0; i < paths.size(); ++i) {
    write_outputs(paths[i], tiled_outputs(trainer, paths[i], o), o, trainer.classes(), written);
    spdlog::info("predicted {}/{} image(s)", i + 1, paths.size());
  }
}

}  // namespace

void log_tiles(const Shape& input, const TileOptions& t) {
  spdlog::info("predicting each image at {} in tiles of {}x{} (the model's input), overlap {:g}, {} blend",
               t.scale == 1 ? std::string("its own size") : fmt::format("{:g} times its size", t.scale), input.w,
               input.h, t.overlap, tile_blend_name(t.blend));
}

std::vector<std::string> without_prediction_outputs(const std::vector<std::string>& paths,
                                                    const std::string& output_dir) {
  auto resolved = [](const fs::path& p) {
    std::error_code ec;
    const fs::path r = fs::weakly_canonical(p, ec);
    return ec ? fs::absolute(p).lexically_normal() : r;
  };
  const fs::path out = resolved(output_dir);
  std::set<fs::path> outputs;
  std::set<std::string> stems;
  for (const auto& p : paths) {
    const std::string stem = fs::path(p).stem().string();
    stems.insert(stem);
    for (const char* suffix : {kMaskSuffix, kProbSuffix, kProbTiffSuffix, kOverlaySuffix, kInstancesSuffix})
      outputs.insert(out / (stem + suffix));
  }
  // <stem>_prob_<c>.png / .tif of another input, in the output folder.
  const auto class_probability = [&](const fs::path& r) {
    const std::string ext = r.extension().string(), name = r.stem().string();
    const size_t cut = name.rfind("_prob_");  // the digits after it hold no "_prob_"
    if (r.parent_path() != out || (ext != ".png" && ext != ".tif") || cut == std::string::npos) return false;
    const std::string digits = name.substr(cut + 6);
    return !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos &&
           stems.count(name.substr(0, cut)) > 0;
  };
  std::vector<std::string> kept;
  for (const auto& p : paths) {
    const fs::path r = resolved(p);
    if (!outputs.count(r) && !class_probability(r)) kept.push_back(p);
  }
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
  if (options.tiles) check_tile_overlap(options.tiles->overlap, "--tile-overlap");
  check_stems(paths);
  const int classes = trainer.classes();
  if (options.instances && classes != 0 && classes != 3)
    throw UserError("--instances separates nuclei for one-channel (sigmoid) models and 3-class boundary models "
                    "(labels_to_classes); this model has " + std::to_string(classes) + " classes: leave out "
                    "--instances");
  check_no_overwrite(paths, options, classes);  // before the folder is made
  std::error_code ec;
  const bool created = fs::create_directories(options.output_dir, ec);
  if (ec || !fs::is_directory(options.output_dir, ec))
    throw UserError("cannot create output folder '" + options.output_dir + "'" +
                    (ec ? ": " + ec.message() : std::string()) + "; pass a writable --output folder");
  // One predict at a time in a folder, checked again once locked: two into one folder would leave a mixture of
  // both, each saying it had written all of its files.
  const DirectoryLock lock(options.output_dir, "predict");
  check_no_overwrite(paths, options, classes);

  if (options.tta) log_tta(trainer.model().input_shape());
  if (options.tiles) log_tiles(trainer.model().input_shape(), *options.tiles);
  std::vector<std::string> written;
  try {
    if (options.tiles)
      predict_tiled_files(trainer, paths, options, written);
    else
      predict_resized_files(trainer, paths, options, written);
  } catch (const UserError& e) {
    // An image that cannot be decoded before anything was written: no empty folder left behind.
    if (created && fs::is_empty(options.output_dir, ec)) fs::remove(options.output_dir, ec);
    if (written.empty()) throw;
    // Else what was written is said, and how to go on (a rerun is refused by the files written).
    throw UserError(std::string(e.what()) + "; " + std::to_string(written.size()) + " output file(s) were " +
                    "written into '" + options.output_dir + "' before this error: once it is dealt with, predict " +
                    "again with --overwrite (or into another --output)");
  } catch (...) {
    if (created && fs::is_empty(options.output_dir, ec)) fs::remove(options.output_dir, ec);
    throw;
  }
  return written;
}

}  // namespace trainer
