#pragma once
// CsvLogger: one row per epoch in Keras's tf.keras.callbacks.CSVLogger format:
// a header "epoch,<log names sorted>", epoch numbered from 0 as Keras writes
// it, values printed with full precision. Rows are appended and flushed as
// each epoch ends, so a killed run keeps every finished epoch.
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace trainer {

class CsvLogger {
 public:
  /// A log at path, created when the first row is written. To continue a
  /// resumed run, give the number of epochs the checkpoint had finished, the
  /// log they were written to (earlier; may be path itself, or the log
  /// beside the checkpoint when the run moves to a new folder) and the
  /// checkpoint's logs (those of its last finished epoch): the header and the
  /// rows of those epochs are copied first, later rows dropped, so the log
  /// never holds an epoch twice; the last epoch's row, when it alone is
  /// missing (a process killed between the checkpoint and the row), is
  /// written from last_logs; other missing rows are warned about. The file at
  /// path is replaced by those rows at once (removed when there are none), as
  /// Keras truncates it at train begin. Throws UserError naming the file when
  /// it cannot be read or written.
  /// initial_epoch: the run's training.initial_epoch, below which no epoch
  /// has a row.
  CsvLogger(std::string path, int finished_epochs = 0, const std::string& earlier = "",
            const std::map<std::string, double>& last_logs = {}, int initial_epoch = 0);
  /// Writes the row of epoch (1-based, as printed; written 0-based as Keras does).
  /// The first row's names fix the columns (with the carried-over log's, if
  /// they differ: every column of both, the earlier rows' missing cells "NA");
  /// later rows use the same columns, "NA" where a name is missing, as Keras.
  /// A later row with a name the columns lack (val_* on the first epoch that
  /// validates, with validation_freq) rewrites the file with every column,
  /// NA in the earlier rows (Keras's CSVLogger adds val_* columns for every
  /// first-row name up front instead).
  void log(int epoch, const std::map<std::string, double>& logs);
  const std::string& path() const { return path_; }

 private:
  /// Fills kept_ from earlier's header and rows of epochs < finished_epochs
  /// (0-based, as written); returns those epochs.
  std::set<int> read_kept(int finished_epochs, const std::string& earlier);
  /// Writes the header, kept_'s rows (merged into one set of columns with
  /// logs' names) to the file and opens it for appending; `resumed`: kept_
  /// comes from an earlier run (a change of columns is then warned about).
  void open(const std::map<std::string, double>& logs, bool resumed);
  std::string path_;
  std::string kept_;  ///< Header and rows carried over from the earlier log.
  std::ofstream out_;
  std::vector<std::string> columns_;  ///< Log names after "epoch", in file order.
};

}  // namespace trainer
