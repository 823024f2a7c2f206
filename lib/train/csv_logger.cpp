#include "train/csv_logger.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "io/atomic_file.h"

namespace trainer {

namespace {

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> cells;
  std::istringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

/// The row of epoch (1-based; written 0-based) with columns' values of logs, "NA" where one is missing.
std::string format_row(int epoch, const std::vector<std::string>& columns, const std::map<std::string, double>& logs) {
  std::string row = std::to_string(epoch - 1);
  char buf[40];
  for (const auto& c : columns) {
    const auto it = logs.find(c);
    if (it == logs.end()) {
      row += ",NA";
      continue;
    }
    std::snprintf(buf, sizeof buf, ",%.9g", it->second);
    row += buf;
  }
  return row + '\n';
}

}  // namespace

CsvLogger::CsvLogger(std::string path, int finished_epochs, const std::string& earlier,
                     const std::map<std::string, double>& last_logs, int initial_epoch)
    : path_(std::move(path)) {
  std::set<int> logged = read_kept(finished_epochs, earlier);
  // The last finished epoch's row, when a process killed after writing the checkpoint did not write it (or the
  // run moved without its log): from the checkpoint's logs.
  if (finished_epochs > 0 && !logged.count(finished_epochs - 1) && !last_logs.empty()) {
    if (kept_.empty()) {  // no log at all: the header from the checkpoint's names
      std::string header = "epoch";
      for (const auto& kv : last_logs) header += "," + kv.first;
      kept_ = header + '\n';
    }
    const std::vector<std::string> cells = split_commas(kept_.substr(0, kept_.find('\n')));
    kept_ += format_row(finished_epochs, std::vector<std::string>(cells.begin() + 1, cells.end()), last_logs);
    logged.insert(finished_epochs - 1);
    spdlog::info("{}: the row of epoch {} was missing; written from the checkpoint's logs", path_, finished_epochs);
  }
  if (finished_epochs > initial_epoch && int(logged.size()) < finished_epochs - initial_epoch)
    spdlog::warn("{} holds the rows of {} of the {} epoch(s) the checkpoint has trained ({}): the other rows stay "
                 "missing", path_, logged.size(), finished_epochs - initial_epoch,
                 earlier.empty() ? "there is no earlier log" : "read from " + earlier);
  // As Keras's CSVLogger truncates its file at train begin: the rows of a run this one replaces (or of its
  // epochs after the checkpoint) must not stand in the log until this run's first epoch ends.
  std::error_code ec;
  if (!kept_.empty())
    write_file_atomic(path_, kept_);
  else if (!std::filesystem::remove(path_, ec) && ec)
    throw UserError("cannot remove the earlier training log '" + path_ + "': " + ec.message() +
                    "; check that its folder is writable");
}

std::set<int> CsvLogger::read_kept(int finished_epochs, const std::string& earlier) {
  std::set<int> epochs;
  if (finished_epochs <= 0 || earlier.empty() || !std::filesystem::exists(earlier)) return epochs;
  std::ifstream in(earlier);
  if (!in) throw UserError("cannot read the training log '" + earlier + "' to continue it");
  std::string line;
  if (!std::getline(in, line) || line.rfind("epoch,", 0) != 0) return epochs;  // not a log of ours: start anew
  kept_ = line + '\n';
  const size_t cells = split_commas(line).size();
  int later = 0;
  while (std::getline(in, line)) {
    int epoch = -1;
    // A row cut short (a full disk while it was written) is left out: the checkpoint's own row is written anew.
    if (std::sscanf(line.c_str(), "%d,", &epoch) == 1 && epoch >= 0 && epoch < finished_epochs &&
        split_commas(line).size() == cells) {
      kept_ += line + '\n';
      epochs.insert(epoch);
    } else if (epoch >= finished_epochs) {
      ++later;
    }
  }
  std::error_code ec;
  if (later > 0 && std::filesystem::equivalent(earlier, path_, ec))
    spdlog::info("{}: the row(s) of {} epoch(s) after the checkpoint's {} are dropped; this run writes its own",
                 path_, later, finished_epochs);
  return epochs;
}

void CsvLogger::open(const std::map<std::string, double>& logs, bool resumed) {
  columns_.clear();
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
      // Another set of logs (e.g. ReduceLROnPlateau's learning_rate added on resume, or val_* after epochs
      // without validation): every column of both, the missing cells "NA" as Keras's CSVLogger writes them,
      // so no earlier value is lost.
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
      // Said when a name is new to the earlier log, not when this epoch only lacks some (no validation).
      if (resumed && columns_.size() + 1 > old.size())
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

void CsvLogger::log(int epoch, const std::map<std::string, double>& logs) {
  const bool grows = out_.is_open() && std::any_of(logs.begin(), logs.end(), [&](const auto& kv) {
                       return std::find(columns_.begin(), columns_.end(), kv.first) == columns_.end();
                     });
  if (grows) {  // this run's rows so far, rewritten with the new columns
    out_.close();
    std::ifstream in(path_);
    kept_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) throw UserError("cannot read back the training log '" + path_ + "'");
    open(logs, false);
  } else if (!out_.is_open()) {
    open(logs, true);
  }
  out_ << format_row(epoch, columns_, logs);
  out_.flush();
  if (!out_)  // a full disk, or past a file-size limit: said, not every later row lost without a word
    throw UserError("cannot write the training log '" + path_ + "' (is the disk full?); the checkpoints of epoch " +
                    std::to_string(epoch) + " are written: --resume its last.h5 once there is room");
}

}  // namespace trainer
