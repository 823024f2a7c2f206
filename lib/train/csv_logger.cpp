#include "train/csv_logger.h"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "io/atomic_file.h"

namespace trainer {

CsvLogger::CsvLogger(std::string path, int finished_epochs, const std::string& earlier) : path_(std::move(path)) {
  if (finished_epochs <= 0 || earlier.empty() || !std::filesystem::exists(earlier)) return;
  std::ifstream in(earlier);
  if (!in) throw UserError("cannot read the training log '" + earlier + "' to continue it");
  std::string line;
  if (!std::getline(in, line) || line.rfind("epoch,", 0) != 0) return;  // not a log of ours: start anew
  kept_ = line + '\n';
  while (std::getline(in, line)) {
    int epoch = -1;
    if (std::sscanf(line.c_str(), "%d,", &epoch) == 1 && epoch >= 0 && epoch < finished_epochs) kept_ += line + '\n';
  }
}

void CsvLogger::log(int epoch, const std::map<std::string, double>& logs) {
  if (!out_.is_open()) {
    std::string header = "epoch";
    for (const auto& kv : logs) header += "," + kv.first;
    std::string start = header + "\n";
    if (!kept_.empty()) {
      const std::string old_header = kept_.substr(0, kept_.find('\n'));
      if (old_header == header)
        start = kept_;
      else
        spdlog::warn("the columns of {} change ({} -> {}); it starts anew", path_, old_header, header);
    }
    // The kept rows exist nowhere else: replace the file atomically, then append.
    write_file_atomic(path_, start);
    out_.open(path_, std::ios::app);
    if (!out_) throw UserError("cannot write the training log '" + path_ + "'; check that its folder is writable");
  }
  out_ << epoch - 1;
  char buf[40];
  for (const auto& kv : logs) {
    std::snprintf(buf, sizeof buf, ",%.9g", kv.second);
    out_ << buf;
  }
  out_ << '\n';
  out_.flush();
}

}  // namespace trainer
