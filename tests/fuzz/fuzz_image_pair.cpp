// Fuzzes the image/mask pair checks: bytes -> a decoded sample (decode_pairs,
// as load_dataset decodes a pair, after the header's pixel limit) or a
// UserError. Anything else (a crash, a hang, a leak, another exception) is
// a finding.
//
// Input: byte 0 chooses the options (bits 0-1: the held size, 8 << (bits);
// bit 2: RGB, else gray; bit 3: class-index masks of 3 classes with 2
// ignored, else binary; bit 4: each pair at its own size, halved, as for
// data.crop; bits 5-6: the files' extension, .png, .jpg, .tif or .bmp, which
// some checks go by, such as the pages of a TIFF), bytes 1-4 the image's
// length n (little-endian, at most what follows), then the image's n bytes
// and the mask's, the rest.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"
#include "data/image_header.h"
#include "scratch_file.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  trainer::fuzz::quiet_logs();
  // data.max_image_pixels for this harness: a 2048x2048 image's pixels, so that a header declaring more is
  // refused before decoding, and what decodes stays within libFuzzer's memory limit.
  trainer::set_image_pixel_limit(size_t(1) << 22, "data.max_image_pixels");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const uint8_t options = data[0];
  uint32_t n = 0;
  std::memcpy(&n, data + 1, 4);
  n = uint32_t(std::min<size_t>(n, size - 5));
  trainer::DataOptions o;
  o.height = o.width = 8 << (options & 3);
  o.channels = options & 4 ? 3 : 1;
  o.classes = options & 8 ? 3 : 0;
  o.ignore_class = options & 8 ? 2 : -1;
  o.native_scale = options & 16 ? 0.5 : 0;
  o.threads = 1;
  const std::string ext[] = {".png", ".jpg", ".tif", ".bmp"};
  const std::string& e = ext[(options >> 5) & 3];
  const std::vector<trainer::ImagePair> pairs{{trainer::fuzz::scratch_file("image" + e, data + 5, n),
                                               trainer::fuzz::scratch_file("image_mask" + e, data + 5 + n,
                                                                           size - 5 - n)}};
  trainer::Dataset out;
  try {
    trainer::decode_pairs(pairs, {0}, o, out);
  } catch (const trainer::UserError&) {
  }
  return 0;
}
