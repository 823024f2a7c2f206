#include "data/image_files.h"

#include <algorithm>
#include <filesystem>

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
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(input, ec))
    if (e.is_regular_file(ec) && is_image_file(e.path().string())) files.push_back(e.path().string());
  if (ec) throw UserError("cannot list " + flag + " folder '" + input + "': " + ec.message());
  if (files.empty())
    throw UserError(flag + " folder '" + input + "' holds no images (looked for " + kExtensions +
                    "); fix the path or add images");
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace trainer
