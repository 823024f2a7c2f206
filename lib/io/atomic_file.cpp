#include "io/atomic_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <vector>

#include "core/error.h"

namespace trainer {

namespace fs = std::filesystem;

void write_file_atomic(const std::string& dest, const std::string& bytes) {
  const std::string tmp = dest + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      throw UserError("cannot write '" + tmp + "'; check that the output folder is writable and has space");
    }
  }
  fs::rename(tmp, dest, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    throw UserError("cannot write '" + dest + "': " + why + "; check that the output folder is writable");
  }
}

void write_png_atomic(const cv::Mat& img, const std::string& dest) {
  std::vector<uchar> bytes;
  bool encoded = false;
  try {
    encoded = cv::imencode(".png", img, bytes);
  } catch (const cv::Exception&) {
    encoded = false;
  }
  if (!encoded) throw InternalError("cannot encode '" + dest + "' as PNG");
  write_file_atomic(dest, std::string(bytes.begin(), bytes.end()));
}

}  // namespace trainer
