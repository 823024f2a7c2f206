#pragma once
// What a training run may do to its output folder (training.output_dir),
// decided once from the command line: a new run or a resumed one, in place
// or as a branch, with or without --overwrite. RunFolder (run_folder.h) then
// writes the run's files there.
#include <optional>
#include <string>

#include "config/config.h"
#include "io/checkpoint.h"
#include "io/folder_lock.h"

namespace trainer {

/// The device, inode, size and modification time of path, as text ("" when
/// it cannot be read): a file written again (a checkpoint is renamed over the
/// old one) has another.
std::string file_identity(const std::string& path);

/// A run's claim on its output folder. Only the process that writes files
/// (world rank 0) calls the checks and lock(); the others stop with it.
class OutputFolder {
 public:
  /// tc: the run's settings (output_dir, ModelCheckpoint, TensorBoard), kept
  /// by reference; overwrite: --overwrite (another run's files may go);
  /// resume: the checkpoint the run resumes (--resume; "" for a new run).
  OutputFolder(const TrainingConfig& tc, bool overwrite, const std::string& resume);

  /// The resumed checkpoint, once read: ckpt (kept by reference), whose run
  /// folder is run_folder (run_folder_of); identity: file_identity of the
  /// file taken before it was read.
  void set_resume(const Checkpoint& ckpt, const std::string& run_folder, const std::string& identity);

  /// Whether a resumed run writes into its own run (resumes_in_place).
  bool in_place() const;

  /// Before the run reads any data: UserError when output_dir cannot be
  /// written (which would otherwise fail at the first epoch's log.csv), or,
  /// for a new run, when it holds another run (check()). With --overwrite,
  /// warns of an earlier run's TensorBoard event folders that stay.
  void check_before_start() const;

  /// Without --overwrite, UserError when the folder holds another run's files
  /// that this run would write over (check_output_holds_no_run), or,
  /// resumed in place, later epochs of its own run
  /// (check_resume_keeps_later_epochs).
  void check() const;

  /// Locks the folder for the whole run (FolderLock: one run at a time there)
  /// and checks again (check()): a run that started and ended there while
  /// this one loaded its data is not overwritten. UserError too when the
  /// resumed checkpoint, resumed in place, changed since it was read (another
  /// run continued from it meanwhile, e.g. a retried job).
  void lock_for_training();

  /// For a resumed run with nothing left to train: whether it lacks its
  /// final.h5 (lacks_final), checked again under the folder's lock, which is
  /// then held. False, unlocked, when it has one.
  bool lock_to_finish();

  /// Says when a resumed run writes into another folder than its run's: a
  /// branch of it. A warning naming the --output that continues it in place
  /// when output_from_flag is false (the config's output_dir was used).
  void announce_branch(bool output_from_flag) const;

 private:
  const TrainingConfig& tc_;
  bool overwrite_;
  std::string resume_, run_folder_, identity_;
  const Checkpoint* checkpoint_ = nullptr;
  std::optional<FolderLock> lock_;
};

}  // namespace trainer
