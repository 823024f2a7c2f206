#include "train/run_folder.h"

#include <spdlog/spdlog.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "core/error.h"
#include "dist/root_work.h"
#include "train/tensorboard.h"

namespace trainer {

namespace fs = std::filesystem;

std::string run_folder_of(const std::string& checkpoint, const std::string& checkpoint_filepath) {
  std::error_code ec;
  // Walked up from the absolute path, so that a bare name (ep1.h5 in run/ck) has folders above it.
  const fs::path cwd = fs::current_path(ec);
  const fs::path beside = fs::absolute(checkpoint, ec).lexically_normal().parent_path();
  auto holds_run = [&](const fs::path& folder) {
    for (const char* name : kRunFiles)
      if (fs::exists(folder / name, ec)) return true;
    return false;
  };
  fs::path run = beside;
  if (!holds_run(beside)) {
    // A ModelCheckpoint file in a subfolder: its run folder is as many levels up as the filepath's folders.
    const fs::path sub = fs::path(checkpoint_filepath).lexically_normal().parent_path();
    fs::path up = beside;
    for (auto part = sub.begin(); part != sub.end(); ++part) up = up.parent_path();
    if (!sub.empty() && holds_run(up)) run = up;
  }
  if (fs::path(checkpoint).is_absolute() || cwd.empty()) return run.string();
  const fs::path relative = run.lexically_relative(cwd);  // in the form the user gave
  return relative.empty() ? run.string() : relative.string();
}

bool resumes_in_place(const std::string& run_folder, const std::string& output_dir) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(run_folder, ec);
  if (ec) return false;
  const fs::path b = fs::weakly_canonical(output_dir, ec);
  return !ec && a == b;
}

namespace {

/// The files in output_dir that a ModelCheckpoint of filepath (its pattern, relative to output_dir; "" for
/// none) could have written, as paths relative to output_dir in name order: in the pattern's folder, the
/// names that match it with {epoch...} as digits and another {name...} as a number's text. A placeholder in
/// the folder part matches nothing.
std::vector<std::string> checkpoint_files(const fs::path& output_dir, const std::string& filepath) {
  const fs::path pattern(filepath);
  const fs::path folder = pattern.parent_path();
  const std::string name = pattern.filename().string();
  std::vector<std::string> out;
  if (filepath.empty() || folder.string().find('{') != std::string::npos) return out;
  std::string re;
  for (size_t i = 0; i < name.size(); ++i) {
    const size_t close = name[i] == '{' ? name.find('}', i) : std::string::npos;
    if (close != std::string::npos) {
      re += name.compare(i + 1, 5, "epoch") == 0 ? "[0-9]+" : "[-+.0-9a-zA-Z]+";
      i = close;
    } else {
      if (std::strchr(".^$|()[]{}*+?\\", name[i])) re += '\\';
      re += name[i];
    }
  }
  const std::regex match(re);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(output_dir / folder, ec))
    if (std::regex_match(e.path().filename().string(), match)) out.push_back((folder / e.path().filename()).string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

void check_output_holds_no_run(const std::string& output_dir, const std::string& resume, const TrainingConfig& tc,
                               const std::string& resume_run_folder) {
  std::string found;
  std::error_code ec;
  for (const char* name : kRunFiles)
    if (fs::exists(fs::path(output_dir) / name, ec)) found += std::string(found.empty() ? "" : ", ") + name;
  // Event files of finished epochs (a run that failed in its first epoch leaves batch values alone, which its
  // rerun may replace).
  if (tc.tensorboard.enabled && holds_epoch_values((fs::path(output_dir) / tc.tensorboard.log_dir).string()))
    found += (found.empty() ? "" : ", ") + (fs::path(tc.tensorboard.log_dir) / "").string() +
             " (TensorBoard event files)";
  const std::vector<std::string> checkpoints =
      checkpoint_files(output_dir, tc.model_checkpoint.enabled ? tc.model_checkpoint.filepath : "");
  for (size_t i = 0; i < checkpoints.size() && i < 3; ++i) found += (found.empty() ? "" : ", ") + checkpoints[i];
  if (checkpoints.size() > 3) found += " and " + std::to_string(checkpoints.size() - 3) + " more checkpoints";
  if (found.empty()) return;
  const std::string last = (fs::path(output_dir) / "last.h5").string();
  std::string ways = "choose another --output, or pass --overwrite to start over in it";
  if (resume.empty() && fs::exists(last, ec)) ways = "continue it with --resume " + last + ", " + ways;
  if (!resume.empty())  // the checkpoint's own folder is the likely intent
    ways = "resume in the checkpoint's own run folder (--output " + resume_run_folder + " when it holds that run), " +
           ways;
  throw UserError("output folder '" + output_dir + "' holds an earlier run (" + found + "), which " +
                  (resume.empty() ? "a new run" : "resuming " + resume + " there") + " would overwrite: " + ways);
}

int logged_epochs(const std::string& folder) {
  std::ifstream in(fs::path(folder) / "log.csv");
  std::string line;
  int epochs = 0;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    char* end = nullptr;
    const long e = std::strtol(line.c_str(), &end, 10);
    if (end != line.c_str() && e >= 0 && e < INT_MAX) epochs = std::max(epochs, int(e) + 1);
  }
  return epochs;
}

void check_resume_keeps_later_epochs(const std::string& output_dir, const std::string& checkpoint, int epoch) {
  std::error_code ec;
  const fs::path last = fs::path(output_dir) / "last.h5";
  if (fs::equivalent(checkpoint, last, ec)) return;
  const int logged = logged_epochs(output_dir);
  if (logged <= epoch) return;
  throw UserError("resuming " + checkpoint + " (epoch " + std::to_string(epoch) + ") in its run's folder '" +
                  output_dir + "' would overwrite the run's later epochs (log.csv holds " + std::to_string(logged) +
                  "; last.h5 and final.h5 are theirs): continue the run with --resume " + last.string() +
                  " (with a higher --epochs once it has finished), branch off at epoch " + std::to_string(epoch) +
                  " into another --output (the log's first " + std::to_string(epoch) +
                  " rows are copied), or pass --overwrite to drop the later epochs");
}

namespace {

/// Whether the final.h5 at path was written before its run had trained `epochs` epochs (lacks_final).
bool final_predates(const fs::path& path, int epochs) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return true;
  try {
    const Checkpoint final = load_checkpoint(path.string());
    const auto trained = final.state_scalars.find("trained_epochs");
    return trained != final.state_scalars.end() && trained->second < epochs;
  } catch (const UserError&) {
    return false;  // not replaced unread: the user sees its error where it is used
  }
}

}  // namespace

bool lacks_final(const std::string& output_dir, const std::string& checkpoint, const Checkpoint& ckpt) {
  std::error_code ec;
  const fs::path out(output_dir);
  const auto next_step = ckpt.state_scalars.find("next_step");
  return fs::equivalent(checkpoint, out / "last.h5", ec) &&  // the run's own last word, not an earlier checkpoint
         (next_step == ckpt.state_scalars.end() || next_step->second == 0) &&  // at an epoch's end
         logged_epochs(output_dir) <= ckpt.epoch && final_predates(out / "final.h5", ckpt.epoch);
}

void remove_dead_temporaries(const std::string& output_dir_text, const ModelCheckpointConfig& mc) {
  const fs::path output_dir(output_dir_text);
  std::vector<fs::path> folders = {output_dir};
  const fs::path sub = fs::path(mc.filepath).parent_path();
  if (mc.enabled && !sub.empty() && sub.string().find('{') == std::string::npos) folders.push_back(output_dir / sub);
  // Checkpoints and log.csv: a run's own files (evaluate's CSV there may be another live process's, elsewhere).
  const std::regex temporary(R"((.+\.h5|log\.csv)\.tmp-([0-9]{1,9}))");
  std::vector<std::string> removed;
  std::error_code ec;
  for (const fs::path& folder : folders)
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      std::smatch m;
      const std::string name = it->path().filename().string();
      if (!std::regex_match(name, m, temporary) || !it->is_regular_file(ec)) continue;
      const pid_t pid = pid_t(std::stol(m[2].str()));
      if (pid == getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to tell)
      std::error_code gone;
      if (fs::remove(it->path(), gone)) removed.push_back(it->path().string());
    }
  if (!removed.empty())
    spdlog::info("removed {} temporary file(s) left by a run killed while writing: {}", removed.size(),
                 fmt::join(removed, ", "));
}

RunFolder::RunFolder(const TrainingConfig& tc, bool voice, const Resume& resume)
    : tc_(tc), voice_(voice), resume_(resume) {
  std::error_code ec;
  if (voice) fs::create_directories(tc.output_dir, ec);
  if (ec)
    throw UserError("cannot create output folder '" + tc.output_dir + "': " + ec.message() +
                    "; set training.output_dir or --output to a writable folder");
  if (!resume.checkpoint) return;
  // A run resumed in its own folder continues that folder's log; one resumed elsewhere takes the rows of the
  // checkpoint's folder (never those of a run it overwrites with --overwrite).
  run_folder_ = resume.run_folder.empty() ? run_folder_of(resume.path, "") : resume.run_folder;
  in_place_ = resumes_in_place(run_folder_, tc.output_dir);
  if (in_place_)
    earlier_log_ = log_path();
  else if (const fs::path theirs = fs::path(run_folder_) / "log.csv"; fs::exists(theirs, ec))
    earlier_log_ = theirs.string();
}

std::string RunFolder::log_path() const { return (fs::path(tc_.output_dir) / "log.csv").string(); }

std::string RunFolder::last_path() const { return (fs::path(tc_.output_dir) / "last.h5").string(); }

void RunFolder::prepare(int epochs_done, const std::map<std::string, double>& last_logs) {
  if (!voice_) return;
  // Resumed in place from a checkpoint before the run's last epoch (with --overwrite): the later epochs go. Not
  // a resume of last.h5 itself, whose log may hold a row more (a process killed between the row and last.h5):
  // its extra rows go, and no file.
  std::error_code ec;
  const bool resumes_last = resume_.checkpoint && fs::equivalent(resume_.path, last_path(), ec);
  const bool rewinds = in_place_ && !resumes_last && logged_epochs(tc_.output_dir) > epochs_done;
  csv_.emplace(log_path(), epochs_done, earlier_log_, last_logs, tc_.initial_epoch);
  remove_dead_temporaries(tc_.output_dir, tc_.model_checkpoint);
  if (!in_place_ || rewinds) remove_stale();
}

void RunFolder::remove_stale() const {
  // A run killed before its first epoch's end left them beside its own files, and predict would take the old
  // run's final.h5. Initial weights are never read from the output folder.
  std::vector<std::string> stale = {"final.h5", "last.h5"}, removed;
  const ModelCheckpointConfig& mc = tc_.model_checkpoint;
  if (mc.enabled && mc.filepath.find('{') == std::string::npos) stale.push_back(mc.filepath);
  std::error_code ec;
  for (const std::string& name : stale) {
    const fs::path p = fs::path(tc_.output_dir) / name;
    if (!fs::is_regular_file(p, ec) || (resume_.checkpoint && fs::equivalent(p, resume_.path, ec))) continue;
    if (fs::remove(p, ec)) removed.push_back(name);
  }
  if (!removed.empty())
    spdlog::info("removed the earlier run's {} from {}: this run writes its own", fmt::join(removed, ", "),
                 tc_.output_dir);
}

void RunFolder::log_row(int epoch, const std::map<std::string, double>& logs, ProcessGroup* world) {
  run_on_root(world, [&] { csv_->log(epoch, logs); });
}

}  // namespace trainer
