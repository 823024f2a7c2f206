#pragma once
// The per-epoch training log in Keras CSVLogger format (log.csv, which
// csv_logger.h writes), read back: for plotting, and for TensorBoard event
// files of epochs a resumed run did not train itself.
#include <string>
#include <vector>

namespace trainer {

/// A parsed log: columns[k] has values[k][row]; NaN where the file has "NA",
/// an empty field, "nan" or an infinity (Keras writes "NA" for a missing value).
struct TrainingLog {
  std::vector<double> epochs;               ///< The epoch column, 0-based as Keras writes it.
  std::vector<std::string> columns;         ///< Every column after "epoch", in file order.
  std::vector<std::vector<double>> values;  ///< [column][row].
};

/// Reads path: a header line "epoch,<name>,<name>..." (CSVLogger's: epoch,
/// then the metric names sorted alphabetically, e.g. accuracy, dice, loss,
/// mean_iou, val_accuracy, ...), then one line per epoch of comma-separated
/// decimal numbers. Blank lines and a '\r' before '\n' are ignored.
/// Throws UserError naming path (and the line, 1-based, and column) when the
/// file is missing or unreadable, is empty, the header's first column is not
/// "epoch", a column name is empty or repeated, there is no column besides
/// epoch, a line has another number of fields than the header, a value is
/// not a number (or the epoch is missing), or there is no epoch line.
TrainingLog read_training_log(const std::string& path);

}  // namespace trainer
