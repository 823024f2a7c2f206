#include "data/image_files.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/ascii.h"
#include "core/error.h"

namespace trainer {

namespace fs = std::filesystem;

namespace {
const char* kExtensions = ".png, .jpg, .jpeg, .tif, .tiff (any case)";
}  // namespace

bool is_image_file(const std::string& path) {
  const std::string ext = ascii_lower(fs::path(path).extension().string());
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".tif" || ext == ".tiff";
}

std::vector<std::string> list_image_files(const std::string& input, const std::string& flag) {
  std::error_code ec;
  if (!fs::exists(input, ec))
    throw UserError(flag + " '" + input + "' does not exist; pass an image file or a folder of images");
  if (!fs::is_directory(input, ec)) {
    if (!is_image_file(input))
      throw UserError(flag + " '" + input + "' is not an image file (" + kExtensions +
                      "); pass an image or a folder of images");
    return {input};
  }
  std::vector<std::string> files = images_in_folder(input, flag);
  if (files.empty())
    throw UserError(flag + " folder '" + input + "' holds no images (looked for " + kExtensions +
                    "); fix the path or add images");
  return files;
}

std::vector<std::string> images_in_folder(const std::string& dir, const std::string& what) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    // Hidden files are not images: macOS's AppleDouble "._name.tif" beside each file copied from its disks
    // would fail a whole folder, and no tool shows them.
    if (!is_image_file(p.string()) || p.filename().string().rfind('.', 0) == 0) continue;
    std::error_code entry_ec;  // its own: the listing's must not be overwritten (nor cleared)
    const fs::file_status st = fs::status(p, entry_ec);
    if (st.type() == fs::file_type::regular) files.push_back(p.string());
    else if (st.type() != fs::file_type::directory)
      throw UserError(what + ": '" + p.string() + "' is not a file that can be read (" +
                      (entry_ec ? entry_ec.message() : std::string("a pipe, socket or device")) +
                      "; a link to nothing or to itself?): fix or remove it");
  }
  if (ec) throw UserError(what + ": cannot list folder '" + dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> without_masks(const std::vector<std::string>& files, const std::string& suffix) {
  std::set<std::string> stems;
  for (const auto& f : files) stems.insert(std::filesystem::path(f).stem().string());
  std::vector<std::string> kept;
  for (const auto& f : files) {
    const std::string stem = std::filesystem::path(f).stem().string();
    const bool is_mask = !suffix.empty() && stem.size() > suffix.size() &&
                         stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0 &&
                         stems.count(stem.substr(0, stem.size() - suffix.size()));
    if (!is_mask) kept.push_back(f);
  }
  return kept;
}

}  // namespace trainer
