#pragma once
// The output folder of a run: which files make a run (kRunFiles), which run
// a checkpoint belongs to, the checks that keep a new or resumed run from
// overwriting another's files, and RunFolder, which prepares the folder for
// fit() and writes its run files (last.h5, log.csv, final.h5) in their order.
#include <map>
#include <optional>
#include <string>

#include "config/config.h"
#include "io/checkpoint.h"
#include "train/csv_logger.h"

namespace trainer {

class ProcessGroup;

/// Files every run writes into its output folder (fit() below): a folder
/// holding one of them holds a run.
inline constexpr const char* kRunFiles[] = {"last.h5", "log.csv", "final.h5"};

/// The folder of the run that checkpoint belongs to: the checkpoint's own
/// folder when it holds a run file (kRunFiles), else, for a ModelCheckpoint
/// file written into a subfolder (`checkpoint_filepath`: the ModelCheckpoint
/// filepath of the run that wrote it, from its stored config, e.g.
/// 'ck/ep{epoch}.h5'), that many folders up when that folder holds one; else
/// the checkpoint's own folder. Relative to the working directory (".": it)
/// when checkpoint is, else absolute.
std::string run_folder_of(const std::string& checkpoint, const std::string& checkpoint_filepath);

/// Whether a run resumed from a checkpoint of run_folder (run_folder_of)
/// writes into that run: run_folder is output_dir, symbolic links resolved.
/// `--output run/ck` with a checkpoint of run/ck/ is not in place when the
/// run's files lie in run/.
bool resumes_in_place(const std::string& run_folder, const std::string& output_dir);

/// UserError when output_dir holds an earlier run (one of kRunFiles, a file
/// that tc's ModelCheckpoint filepath pattern could have written, e.g.
/// best.h5 or ep03.h5, or event files holding finished epochs in its
/// TensorBoard log_dir, holds_epoch_values), whose files a new run there (resume "": none), or a run
/// resumed from another folder's checkpoint, would overwrite; the message
/// names the files (up to three checkpoints) and the fixes: --resume its
/// last.h5 (a new run, when there is one), --output resume_run_folder, the
/// checkpoint's run folder (a resumed run), another --output, or
/// --overwrite. A missing or empty folder is fine.
void check_output_holds_no_run(const std::string& output_dir, const std::string& resume, const TrainingConfig& tc,
                               const std::string& resume_run_folder = "");

/// The epochs (1-based) that the log.csv in folder holds rows for: one more
/// than the largest 0-based epoch in its first column; 0 without a log.
int logged_epochs(const std::string& folder);

/// UserError when a run resumed in place (resumes_in_place) from checkpoint,
/// which finished `epoch` epochs, would overwrite later epochs of its run:
/// output_dir's log.csv holds rows past `epoch`, which the resumed run drops
/// along with last.h5 and final.h5. The message names the epochs and the
/// fixes: --resume the folder's last.h5, another --output to branch off, or
/// --overwrite. Resuming the folder's own last.h5 always passes.
void check_resume_keeps_later_epochs(const std::string& output_dir, const std::string& checkpoint, int epoch);

/// Whether a resumed run with nothing left to train (its epochs done, or
/// EarlyStopping ended it) lacks the final.h5 it would have written: the
/// checkpoint (ckpt, read from path checkpoint) is output_dir's last.h5 at an
/// epoch's end, log.csv holds no later epoch, and output_dir has no final.h5
/// of that epoch: none (a process ended between the last epoch's last.h5 and
/// final.h5), or one whose trained_epochs is below ckpt.epoch (a run resumed
/// for more epochs ended while writing its final.h5, leaving the earlier
/// finish's). A final.h5 without trained_epochs, or one that cannot be read,
/// counts as the run's.
bool lacks_final(const std::string& output_dir, const std::string& checkpoint, const Checkpoint& ckpt);

/// fit()'s output folder (training.output_dir): where a resumed run's
/// earlier log rows come from, and the run files written in their order.
/// Only the process that writes files (world rank 0, `voice`) touches the
/// folder; the others keep the paths.
class RunFolder {
 public:
  /// The checkpoint a run resumes (checkpoint null: a new run).
  struct Resume {
    const Checkpoint* checkpoint = nullptr;
    std::string path;        ///< Its path.
    std::string run_folder;  ///< Its run folder (run_folder_of; "": looked up here).
  };
  /// Creates output_dir (voice only). UserError naming it when it cannot be.
  RunFolder(const TrainingConfig& tc, bool voice, const Resume& resume);
  /// The resumed checkpoint's run folder ("" for a new run).
  const std::string& run_folder() const { return run_folder_; }
  /// The log.csv holding the resumed run's earlier rows: output_dir's own
  /// when resumed in place, else the run folder's when it has one, else "".
  const std::string& earlier_log() const { return earlier_log_; }
  std::string log_path() const;
  std::string last_path() const;
  /// Before the first step: log.csv with the rows of the epochs_done epochs
  /// of the earlier log (last_logs: the checkpoint's, for a row a kill
  /// lost), the temporary files of killed writers removed, and, for a run
  /// that does not continue the folder's own run (a new run, a branch, a
  /// rewind: all need --overwrite), the earlier run's final.h5, last.h5 and
  /// fixed-name ModelCheckpoint file, never the resumed checkpoint. UserError
  /// naming log.csv when it cannot be written.
  void prepare(int epochs_done, const std::map<std::string, double>& last_logs);
  /// Appends epoch's row to log.csv (world rank 0 writes; a failure is
  /// raised on every process of world).
  void log_row(int epoch, const std::map<std::string, double>& logs, ProcessGroup* world);

 private:
  /// Removes the stale run files of prepare().
  void remove_stale() const;

  const TrainingConfig& tc_;
  bool voice_;
  Resume resume_;
  std::string run_folder_, earlier_log_;
  bool in_place_ = false;
  std::optional<CsvLogger> csv_;
};

/// Removes the temporary files ("<file>.tmp-<pid>", io/atomic_file.h) that a
/// process killed while writing a checkpoint (.h5) or log.csv left in
/// output_dir (or the ModelCheckpoint's folder in it): those of a pid that
/// runs no more on this machine. Said at info level.
void remove_dead_temporaries(const std::string& output_dir, const ModelCheckpointConfig& mc);

}  // namespace trainer
