#pragma once
// Finding image files by extension, for commands that take a file or a folder.
#include <string>
#include <vector>

namespace trainer {

/// True when path ends in .png, .jpg, .jpeg, .tif or .tiff (any case), the
/// formats the data loader reads (docs/data.md).
bool is_image_file(const std::string& path);

/// The images named by `input`: the file itself, or the image files directly
/// in the folder (sorted by name; other files ignored). flag names the option
/// in messages (e.g. "--input"). Throws UserError naming the path and the fix
/// when it does not exist, is a file with another extension, or is a folder
/// without images.
std::vector<std::string> list_image_files(const std::string& input, const std::string& flag);

}  // namespace trainer
