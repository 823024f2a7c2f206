#include "data/dsb_layout.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <vector>

#include "core/ascii.h"
#include "core/error.h"
#include "data/image_decode.h"
#include "data/image_header.h"
#include "io/atomic_file.h"

namespace trainer {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxLabels = 65535;  // largest value of a 16-bit label map

const char* kLayout = "<id>/images/<id>.png and <id>/masks/*.png";

// One id folder of the input, checked for its layout.
struct Item {
  std::string id;
  fs::path image;                // <input>/<id>/images/<id>.png
  std::vector<fs::path> masks;   // <input>/<id>/masks/*.png, sorted by name
};

std::string size_str(const cv::Mat& m) { return std::to_string(m.cols) + "x" + std::to_string(m.rows); }

// Folders of input (names not starting with '.'), sorted; throws when input is
// not a folder or holds none.
std::vector<std::string> list_ids(const fs::path& input) {
  std::error_code ec;
  if (!fs::is_directory(input, ec))
    throw UserError("input folder '" + input.string() + "' " +
                    (fs::exists(input, ec) ? "is not a folder" : "does not exist") +
                    "; pass the folder that holds the DSB 2018 id folders (" + kLayout + ")");
  std::vector<std::string> ids;
  for (const auto& e : fs::directory_iterator(input, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory(ec) && name[0] != '.') ids.push_back(name);
  }
  if (ec) throw UserError("cannot list input folder '" + input.string() + "': " + ec.message());
  if (ids.empty())
    throw UserError("input folder '" + input.string() + "' holds no id folders; pass the folder that holds " +
                    kLayout);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Checks the layout of one id folder (files present, mask count) without decoding.
Item check_item(const fs::path& input, const std::string& id) {
  std::error_code ec;
  Item item{id, input / id / "images" / (id + ".png"), {}};
  if (!fs::is_regular_file(item.image, ec))
    throw UserError("image '" + item.image.string() + "' does not exist; every id folder needs " + kLayout +
                    " (add the image or remove the folder '" + (input / id).string() + "')");
  const fs::path masks = input / id / "masks";
  if (!fs::is_directory(masks, ec))
    throw UserError("mask folder '" + masks.string() + "' does not exist; every id folder needs " + kLayout +
                    " (add the masks or remove the folder '" + (input / id).string() + "')");
  for (const auto& e : fs::directory_iterator(masks, ec))
    if (e.is_regular_file(ec) && ascii_lower(e.path().extension().string()) == ".png") item.masks.push_back(e.path());
  if (ec) throw UserError("cannot list mask folder '" + masks.string() + "': " + ec.message());
  if (item.masks.size() > kMaxLabels)
    throw UserError("mask folder '" + masks.string() + "' holds " + std::to_string(item.masks.size()) +
                    " masks but a 16-bit label map holds at most 65535 nuclei; split the image or remove masks");
  std::sort(item.masks.begin(), item.masks.end());
  return item;
}

// Decodes path as OpenCV stores it (IMREAD_UNCHANGED); throws when it cannot.
cv::Mat read_png(const fs::path& path, const char* what) {
  check_whole_png(path.string());
  check_image_pixels(path.string());
  cv::Mat m;
  try {
    check_image_format(path.string());  // no other decoder of OpenCV's gets it
    require_image_size(path.string());
    m = cv::imread(path.string(), cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception&) {
    m.release();
  } catch (const UserError&) {  // not an image of ours: "cannot be decoded" below
    m.release();
  }
  if (m.empty())
    throw UserError(std::string(what) + " '" + path.string() +
                    "' cannot be decoded as a PNG; replace it with a valid PNG or remove it");
  return m;
}

// Foreground of a mask [H, W, C] (8- or 16-bit): 255 where any colour channel
// is nonzero (channel 0 for gray and gray+alpha, 0..2 for BGR/BGRA), else 0;
// returns 8-bit [H, W].
cv::Mat foreground(const cv::Mat& mask, const fs::path& path) {
  if (mask.depth() != CV_8U && mask.depth() != CV_16U)
    throw UserError("mask '" + path.string() + "' is neither 8- nor 16-bit; save it as an 8-bit 0/255 PNG");
  const int colours = mask.channels() >= 3 ? 3 : 1;
  cv::Mat fg = cv::Mat::zeros(mask.size(), CV_8UC1);
  for (int c = 0; c < colours; ++c) {
    cv::Mat channel;
    cv::extractChannel(mask, channel, c);
    fg |= (channel != 0);
  }
  return fg;
}

// Copies src to dest byte for byte, atomically (temp name + rename).
void copy_bytes(const fs::path& src, const fs::path& dest) {
  const fs::path tmp = temp_path(dest.string());
  std::error_code ec;
  fs::copy_file(src, tmp, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw UserError("cannot copy '" + src.string() + "' to '" + tmp.string() + "': " + ec.message() +
                    "; check that the output folder is writable and has space");
  }
  commit_temp(tmp.string(), dest.string());
}

// Decodes one id's masks into its 16-bit label map (see dsb_label_map); image: its image, decoded.
cv::Mat label_map(const Item& item, const cv::Mat& image) {
  cv::Mat labels = cv::Mat::zeros(image.size(), CV_16UC1);
  for (size_t k = 0; k < item.masks.size(); ++k) {
    const cv::Mat mask = read_png(item.masks[k], "mask");
    if (mask.size() != image.size())
      throw UserError("mask '" + item.masks[k].string() + "' is " + size_str(mask) + " but its image '" +
                      item.image.string() + "' is " + size_str(image) +
                      "; every mask must have its image's size (fix or remove the mask)");
    labels.setTo(cv::Scalar(double(k + 1)), foreground(mask, item.masks[k]));  // later masks overwrite earlier ones
  }
  return labels;
}

// Decodes one id's image and masks, builds its union mask and label map and writes the three files.
void convert_item(const Item& item, const fs::path& output, const std::string& mask_suffix) {
  const cv::Mat labels = label_map(item, read_png(item.image, "image"));
  const cv::Mat union_mask = (labels != 0);  // 8-bit 0/255
  copy_bytes(item.image, output / "train_im" / (item.id + ".png"));
  write_png_atomic((output / "train_mask" / (item.id + mask_suffix + ".png")).string(), union_mask);
  write_png_atomic((output / "labels" / (item.id + "_labels.png")).string(), labels);
}

}  // namespace

void convert_dsb_to_flat(const std::string& input, const std::string& output, const std::string& mask_suffix) {
  if (mask_suffix.find_first_of("/\\") != std::string::npos)
    throw UserError("mask suffix '" + mask_suffix + "' contains a path separator; use a plain suffix such as _mask");
  const fs::path in(input), out(output);
  const std::vector<std::string> ids = list_ids(in);
  {
    // Written into the layout itself, train_im/ and the rest would read as ids next time.
    std::error_code ec;
    const fs::path a = fs::weakly_canonical(in, ec), b = fs::weakly_canonical(out, ec);
    auto bi = b.begin();
    bool inside = !ec;
    for (auto ai = a.begin(); inside && ai != a.end(); ++ai, ++bi) inside = bi != b.end() && *ai == *bi;
    if (inside)
      throw UserError("output folder '" + output + "' lies in the DSB layout '" + input +
                      "', which the converted folders would spoil; pass an --output outside it");
  }
  std::vector<Item> items;
  items.reserve(ids.size());
  for (const auto& id : ids) items.push_back(check_item(in, id));

  for (const char* sub : {"train_im", "train_mask", "labels"}) {
    std::error_code ec;
    fs::create_directories(out / sub, ec);
    if (ec)
      throw UserError("cannot create output folder '" + (out / sub).string() + "': " + ec.message() +
                      "; pass a writable --output folder");
  }

  std::vector<std::exception_ptr> errors(items.size());
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic)
  for (long i = 0; i < long(items.size()); ++i) {
    if (failed.load()) continue;
    try {
      convert_item(items[size_t(i)], out, mask_suffix);
    } catch (...) {
      errors[size_t(i)] = std::current_exception();
      failed.store(true);
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

std::vector<std::string> list_dsb_ids(const std::string& input) { return list_ids(input); }

cv::Mat dsb_label_map(const std::string& input, const std::string& id, std::string* image_path) {
  const Item item = check_item(input, id);
  if (image_path) *image_path = item.image.string();
  return label_map(item, read_png(item.image, "image"));
}

}  // namespace trainer
