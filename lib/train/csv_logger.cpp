#include "train/csv_logger.h"

#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "io/atomic_file.h"

namespace trainer {

CsvLogger::CsvLogger(std::string path, int finished_epochs, const std::string& earlier) : path_(std::move(path)) {
  read_kept(finished_epochs, earlier);
  // As Keras's CSVLogger truncates its file at train begin: the rows of a run this one replaces (or of its
  // epochs after the checkpoint) must not stand in the log until this run's first epoch ends.
  std::error_code ec;
  if (!kept_.empty())
    write_file_atomic(path_, kept_);
  else if (!std::filesystem::remove(path_, ec) && ec)
    throw UserError("cannot remove the earlier training log '" + path_ + "': " + ec.message() +
                    "; check that its folder is writable");
}

void CsvLogger::read_kept(int finished_epochs, const std::string& earlier) {
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

namespace {

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> cells;
  std::istringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

}  // namespace

void CsvLogger::log(int epoch, const std::map<std::string, double>& logs) {
  if (!out_.is_open()) {
    for (const auto& kv : logs) columns_.push_back(kv.first);
    std::string header = "epoch";
    for (const auto& c : columns_) header += "," + c;
    std::string start = header + "\n";
    if (!kept_.empty()) {
      std::istringstream rows(kept_);
      std::string line;
      std::getline(rows, line);
      if (line == header) {
        start = kept_;
      } else {
        // Another set of logs (e.g. ReduceLROnPlateau's learning_rate added on
        // resume): every column of both, the missing cells "NA" as Keras's
        // CSVLogger writes them, so no earlier value is lost.
        const std::string old_header = line;
        const std::vector<std::string> old = split_commas(line);
        std::set<std::string> all(columns_.begin(), columns_.end());
        all.insert(old.begin() + 1, old.end());
        columns_.assign(all.begin(), all.end());
        start = "epoch";
        for (const auto& c : columns_) start += "," + c;
        start += "\n";
        while (std::getline(rows, line)) {
          const std::vector<std::string> cells = split_commas(line);
          std::map<std::string, std::string> by_name;
          for (size_t k = 1; k < old.size() && k < cells.size(); ++k) by_name[old[k]] = cells[k];
          start += cells.empty() ? std::string() : cells[0];
          for (const auto& c : columns_) start += "," + (by_name.count(c) ? by_name[c] : std::string("NA"));
          start += "\n";
        }
        spdlog::warn("the columns of {} change ({} -> {}); its rows now hold every column of both, NA where an "
                     "epoch has no value",
                     path_, old_header, start.substr(0, start.find('\n')));
      }
    }
    // The kept rows exist nowhere else: replace the file atomically, then append.
    write_file_atomic(path_, start);
    out_.open(path_, std::ios::app);
    if (!out_) throw UserError("cannot write the training log '" + path_ + "'; check that its folder is writable");
  }
  out_ << epoch - 1;
  char buf[40];
  for (const auto& c : columns_) {
    const auto it = logs.find(c);
    if (it == logs.end()) {
      out_ << ",NA";
      continue;
    }
    std::snprintf(buf, sizeof buf, ",%.9g", it->second);
    out_ << buf;
  }
  out_ << '\n';
  out_.flush();
}

}  // namespace trainer
