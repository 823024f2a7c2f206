#include "train/csv_logger.h"

#include <cstdio>
#include <filesystem>

#include "core/error.h"

namespace trainer {

CsvLogger::CsvLogger(const std::string& path, bool append) : path_(path) {
  const bool had_rows = append && std::filesystem::exists(path) && std::filesystem::file_size(path) > 0;
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) throw UserError("cannot write the training log '" + path + "'; check that its folder is writable");
  header_written_ = had_rows;
}

void CsvLogger::log(int epoch, const std::map<std::string, double>& logs) {
  if (!header_written_) {
    out_ << "epoch";
    for (const auto& kv : logs) out_ << ',' << kv.first;
    out_ << '\n';
    header_written_ = true;
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
