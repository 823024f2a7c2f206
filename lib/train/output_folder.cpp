#include "train/output_folder.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/shell_word.h"
#include "io/atomic_file.h"
#include "train/run_folder.h"
#include "train/tensorboard.h"

namespace trainer {

std::string file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

OutputFolder::OutputFolder(const TrainingConfig& tc, bool overwrite, const std::string& resume)
    : tc_(tc), overwrite_(overwrite), resume_(resume) {}

void OutputFolder::set_resume(const Checkpoint& ckpt, const std::string& run_folder, const std::string& identity) {
  checkpoint_ = &ckpt;
  run_folder_ = run_folder;
  identity_ = identity;
}

bool OutputFolder::in_place() const { return checkpoint_ && resumes_in_place(run_folder_, tc_.output_dir); }

void OutputFolder::check_before_start() const {
  check_writable_folder(tc_.output_dir, "the output folder",
                        "make it writable, or set training.output_dir or --output to a writable folder");
  if (resume_.empty()) check();  // a resumed run is checked once its checkpoint has been read
  if (!overwrite_) return;
  // An earlier run's event files that this run does not replace.
  if (const std::vector<std::string> stale = other_event_folders(tc_.output_dir, tc_); !stale.empty())
    spdlog::warn("--overwrite keeps the TensorBoard event files in {}{}, which tensorboard --logdir {} shows "
                 "beside this run; remove them if they are an earlier run's", stale.front(),
                 stale.size() > 1 ? " and " + std::to_string(stale.size() - 1) + " more folder(s)" : "",
                 tc_.output_dir);
}

void OutputFolder::check() const {
  if (overwrite_) return;
  if (resume_.empty())
    check_output_holds_no_run(tc_.output_dir, "", tc_);
  else if (!in_place())
    check_output_holds_no_run(tc_.output_dir, resume_, tc_, run_folder_);
  else
    check_resume_keeps_later_epochs(tc_.output_dir, resume_, checkpoint_->epoch);
}

void OutputFolder::lock_for_training() {
  lock_.emplace(tc_.output_dir);
  check();
  // Two resumes of one last.h5 (a retried job): the first may continue the run while the second loads its
  // data, and the second would then train those epochs again from its stale copy.
  if (in_place() && file_identity(resume_) != identity_)
    throw UserError(resume_ + " has changed since this run read it: another run continued from it meanwhile "
                    "(or wrote it again); resume again to continue from what it holds now");
}

bool OutputFolder::lock_to_finish() {
  // An earlier checkpoint, a mid-epoch one, or a run still training must not get a final.h5.
  if (!checkpoint_ || !lacks_final(tc_.output_dir, resume_, *checkpoint_)) return false;
  lock_.emplace(tc_.output_dir);
  return lacks_final(tc_.output_dir, resume_, *checkpoint_);
}

void OutputFolder::announce_branch(bool output_from_flag) const {
  if (!checkpoint_ || in_place()) return;
  const std::string branch = "resuming the run of '" + run_folder_ + "' into '" + tc_.output_dir + "'" +
                             (output_from_flag ? "" : " (the config's output_dir)") +
                             ": a branch of that run, whose own folder stays as it is";
  if (output_from_flag)
    spdlog::info("{}", branch);
  else
    spdlog::warn("{}; to continue it in its own folder, pass --output {}", branch, shell_word(run_folder_));
}

}  // namespace trainer
