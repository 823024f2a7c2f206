#include "train/training_log.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "core/error.h"
#include "core/file_kind.h"

namespace trainer {

namespace {

const char* kFormat = "a Keras CSVLogger log: a header 'epoch,<metric names>', then one line per epoch";

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) return fields;
    start = comma + 1;
  }
}

// The value of a field; NaN for a missing one ("NA", "", "nan", infinities); throws for text.
double parse_value(const std::string& field, const std::string& where) {
  if (field.empty() || field == "NA") return std::numeric_limits<double>::quiet_NaN();
  char* end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  if (end == field.c_str() || *end != '\0')
    throw UserError(where + ": '" + field + "' is not a number; the log must be " + kFormat);
  return std::isfinite(v) ? v : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

TrainingLog read_training_log(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw UserError("'" + path + "' does not exist; pass the log.csv the trainer writes in training.output_dir");
  if (std::filesystem::is_directory(path, ec))
    throw UserError("'" + path + "' is a folder; pass the log.csv file the trainer writes in it");
  require_plain_file(path, "the log", "pass the log.csv the trainer writes in training.output_dir");
  // A log holds one short row per epoch: a file past this is not one, and is not read into memory.
  constexpr std::uintmax_t kMaxLogBytes = std::uintmax_t(64) << 20;
  if (const auto size = std::filesystem::file_size(path, ec); !ec && size > kMaxLogBytes)
    throw UserError("'" + path + "' is " + std::to_string(size >> 20) + " MiB, more than a training log's 64 MiB; "
                    "pass the log.csv the trainer writes in training.output_dir");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read '" + path + "': " + std::strerror(errno) + "; check its permissions");

  TrainingLog log;
  std::string line;
  int line_no = 0, header_line = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    const std::vector<std::string> fields = split(line);
    const std::string at = "'" + path + "' line " + std::to_string(line_no);
    if (!header_line) {
      header_line = line_no;
      if (fields[0] != "epoch")
        throw UserError(at + ": the first column is '" + fields[0] + "', not 'epoch'; the file must be " + kFormat);
      if (fields.size() < 2) throw UserError(at + ": no column besides 'epoch'; the file must be " + kFormat);
      std::set<std::string> seen;
      for (size_t k = 1; k < fields.size(); ++k) {
        if (fields[k].empty()) throw UserError(at + ": column " + std::to_string(k + 1) + " has no name");
        if (!seen.insert(fields[k]).second) throw UserError(at + ": column '" + fields[k] + "' appears twice");
        log.columns.push_back(fields[k]);
      }
      log.values.resize(log.columns.size());
      continue;
    }
    if (fields.size() != log.columns.size() + 1)
      throw UserError(at + ": " + std::to_string(fields.size()) + " values, but the header (line " +
                      std::to_string(header_line) + ") names " + std::to_string(log.columns.size() + 1) +
                      " columns");
    const double epoch = parse_value(fields[0], at + ", column 'epoch'");
    if (std::isnan(epoch)) throw UserError(at + ", column 'epoch': the epoch is missing; the log must be " + kFormat);
    log.epochs.push_back(epoch);
    for (size_t k = 0; k < log.columns.size(); ++k)
      log.values[k].push_back(parse_value(fields[k + 1], at + ", column '" + log.columns[k] + "'"));
  }
  if (in.bad()) throw UserError("cannot read '" + path + "': " + std::strerror(errno));
  if (!header_line) throw UserError("'" + path + "' is empty; it must be " + std::string(kFormat));
  if (log.epochs.empty())
    throw UserError("'" + path + "' has a header but no epoch lines yet; plot it after the first epoch ends");
  return log;
}

}  // namespace trainer
