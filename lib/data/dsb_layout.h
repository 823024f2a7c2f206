#pragma once
// Conversion of the 2018 Data Science Bowl folder layout (one PNG per nucleus)
// into the flat layout the trainer reads (one image, one mask per image).
#include <opencv2/core.hpp>
#include <string>
#include <vector>

namespace trainer {

/// Converts the DSB 2018 layout under `input`:
///
///     <input>/<id>/images/<id>.png     the image
///     <input>/<id>/masks/*.png         one mask per nucleus, same size as the image,
///                                      foreground = nonzero (any colour channel,
///                                      alpha ignored), 8- or 16-bit
///
/// into `output` (folders created as needed):
///
///     <output>/train_im/<id>.png                  the image file, copied byte for byte
///     <output>/train_mask/<id><mask_suffix>.png   8-bit [H, W], 0 background, 255 = in
///                                                 any mask (union of the masks)
///     <output>/labels/<id>_labels.png             16-bit [H, W], 0 background, k = the
///                                                 k-th mask file in sorted name order
///                                                 (1..N); where masks overlap, the
///                                                 later mask in that order wins
///
/// Every folder of `input` whose name does not start with '.' is an id; files
/// directly in `input` are ignored. An id with an empty masks/ folder gets
/// all-zero mask and labels. Each output file is written to a temporary name
/// (<file>.tmp-<pid>) and renamed, so a file is either complete or absent.
/// The layout of every id is checked before anything is written. Ids are
/// then converted in parallel (OpenMP); a file that fails to decode stops the
/// run once the ids in progress finish, and the ids already written stay.
///
/// Throws UserError naming the file and the fix when: `input` is not a
/// folder or holds no id folders; an id lacks images/<id>.png or masks/; an
/// image or mask cannot be decoded; a mask's size differs from its image's;
/// an id has more than 65535 masks (the 16-bit label map's limit); an output
/// folder or file cannot be written or lies in `input`; `mask_suffix`
/// contains '/' or '\'.
void convert_dsb_to_flat(const std::string& input, const std::string& output,
                         const std::string& mask_suffix);

/// The id folders of a DSB 2018 layout folder `input` (names not starting
/// with '.'), sorted. Throws UserError when input is not a folder or holds none.
std::vector<std::string> list_dsb_ids(const std::string& input);

/// The label map of one id of the DSB 2018 layout under `input`, as
/// convert_dsb_to_flat writes it: CV_16UC1 [H, W] at the image's size, 0
/// background, k = the k-th mask in sorted name order (later masks win where
/// they overlap). image_path (when given) receives <input>/<id>/images/<id>.png.
/// Throws UserError as convert_dsb_to_flat for a bad layout or file.
cv::Mat dsb_label_map(const std::string& input, const std::string& id, std::string* image_path = nullptr);

}  // namespace trainer
