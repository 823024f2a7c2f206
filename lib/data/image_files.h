#pragma once
// Finding image files by extension, for commands that take a file or a folder.
#include <string>
#include <vector>

namespace trainer {

/// True when path ends in .png, .jpg, .jpeg, .tif or .tiff (any case), the
/// formats the data loader reads (docs/data.md).
bool is_image_file(const std::string& path);

/// The image files (is_image_file names) directly in folder dir, as paths
/// dir/name in name order; other files, hidden ones (".name", as macOS's
/// "._name.tif" AppleDouble files) and subfolders are ignored. what
/// starts messages (e.g. "data.images"). Throws UserError "<what>: ..." naming
/// the folder when it cannot be listed, or naming the entry when one with an
/// image's name is neither a folder nor a regular file (a link to nothing or
/// to itself, a pipe, a device), which would otherwise be dropped or read forever.
std::vector<std::string> images_in_folder(const std::string& dir, const std::string& what);

/// files (names or paths) without the masks among them, for a folder that
/// holds images and their masks: a file whose stem is another file's stem
/// followed by suffix (a_mask.png beside a.png, for "_mask"). The order is
/// kept; nothing is dropped for an empty suffix.
std::vector<std::string> without_masks(const std::vector<std::string>& files, const std::string& suffix);

/// The images named by `input`: the file itself, or the image files directly
/// in the folder (sorted by name; other files ignored). flag names the option
/// in messages (e.g. "--input"). Throws UserError naming the path and the fix
/// when it does not exist, is a file with another extension, or is a folder
/// without images.
std::vector<std::string> list_image_files(const std::string& input, const std::string& flag);

}  // namespace trainer
