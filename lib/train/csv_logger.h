#pragma once
// CSVLogger: one row per epoch in Keras's tf.keras.callbacks.CSVLogger format:
// a header "epoch,<log names sorted>", epoch numbered from 0 as Keras writes
// it, values printed with full precision. Rows are appended and flushed as
// each epoch ends, so a killed run keeps every finished epoch.
#include <fstream>
#include <map>
#include <string>

namespace trainer {

class CsvLogger {
 public:
  /// Opens path; append = true (resuming a run) keeps the rows already there and
  /// writes no second header. Throws UserError naming path when it cannot be opened.
  CsvLogger(const std::string& path, bool append);
  /// Writes the row of epoch (1-based, as printed; written 0-based as Keras does).
  /// The first row's names fix the columns; later rows use the same columns.
  void log(int epoch, const std::map<std::string, double>& logs);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
  bool header_written_;
};

}  // namespace trainer
