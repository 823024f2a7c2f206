#include "data/boundary_classes.h"

#include <filesystem>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

#include "core/error.h"
#include "data/image_decode.h"
#include "data/image_files.h"
#include "io/atomic_file.h"

namespace trainer {

namespace fs = std::filesystem;

cv::Mat boundary_classes(const cv::Mat& labels, int width) {
  if (labels.channels() != 1 || (labels.depth() != CV_8U && labels.depth() != CV_16U) || width < 1)
    throw InternalError("boundary_classes: labels must be 8- or 16-bit single-channel and width >= 1");
  const cv::Mat window = cv::getStructuringElement(cv::MORPH_RECT, cv::Size(2 * width + 1, 2 * width + 1));
  cv::Mat highest, lowest;  // the default borders leave the image edge out of both
  cv::dilate(labels, highest, window);
  cv::erode(labels, lowest, window);
  cv::Mat classes(labels.size(), CV_8UC1, cv::Scalar(kBackground));
  classes.setTo(kInterior, labels != 0);
  classes.setTo(kBoundary, (labels != 0) & ((highest != labels) | (lowest != labels)));
  return classes;
}

std::vector<std::string> convert_labels_to_classes(const std::string& labels_dir, const std::string& output_dir,
                                                   const std::string& labels_suffix, const std::string& mask_suffix,
                                                   int width, bool overwrite) {
  const std::vector<std::string> files = list_image_files(labels_dir, "--input");
  std::vector<std::string> stems;
  for (const auto& f : files) {
    const std::string stem = fs::path(f).stem().string();
    if (stem.size() <= labels_suffix.size() ||
        stem.compare(stem.size() - labels_suffix.size(), labels_suffix.size(), labels_suffix) != 0)
      throw UserError("'" + f + "' does not end in the labels suffix '" + labels_suffix +
                      "' (<stem>" + labels_suffix + ".png); pass --labels-suffix, or remove the file");
    stems.push_back(stem.substr(0, stem.size() - labels_suffix.size()));
  }
  std::error_code ec;
  // Nothing is replaced without overwrite (the binary training masks may be what it would replace).
  std::vector<std::string> existing;
  for (const std::string& stem : stems)
    if (fs::exists(fs::path(output_dir) / (stem + mask_suffix + ".png"), ec))
      existing.push_back((fs::path(output_dir) / (stem + mask_suffix + ".png")).string());
  if (!existing.empty() && !overwrite)
    throw UserError("'" + output_dir + "' already holds " + std::to_string(existing.size()) + " of the " +
                    std::to_string(stems.size()) + " masks to write (e.g. '" + existing.front() +
                    "'); nothing was written: pass another --output, or --overwrite to replace them");
  // Every file is read and checked before any mask is written: a refusal leaves --output as it was.
  std::vector<cv::Mat> classes;
  for (const std::string& file : files) {
    const cv::Mat labels = read_label_image(file);
    // One value over several separate objects: a binary mask (0/255 or 0/1), whose touching nuclei are one.
    double lo = 0, hi = 0;
    cv::minMaxLoc(labels, &lo, &hi, nullptr, nullptr, labels != 0);
    cv::Mat components;
    if (hi > 0 && lo == hi && cv::connectedComponents(labels != 0, components, 8) > 2)
      throw UserError("'" + file + "' holds one value, " + std::to_string(int(hi)) + ", for several separate "
                      "objects: a binary mask, in which touching nuclei are one object, not a label image (0 "
                      "background, 1..N one nucleus each); pass label images, e.g. the DSB's flat/labels "
                      "(docs/data.md); nothing was written");
    classes.push_back(boundary_classes(labels, width));
  }
  fs::create_directories(output_dir, ec);
  if (ec || !fs::is_directory(output_dir, ec))
    throw UserError("cannot create output folder '" + output_dir + "'" + (ec ? ": " + ec.message() : std::string()) +
                    "; pass a writable --output folder");
  std::vector<std::string> written;
  for (size_t i = 0; i < files.size(); ++i) {
    written.push_back((fs::path(output_dir) / (stems[i] + mask_suffix + ".png")).string());
    write_png_atomic(written.back(), classes[i]);
  }
  return written;
}

}  // namespace trainer
