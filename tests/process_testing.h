#pragma once
// Helpers for tests that run the project's binaries (trainer, preview,
// plot_curves) as child processes: start one with its output sent to files,
// wait for it, read what it wrote, and give each case a fresh temp folder.
//
// Exit codes: a child that exits reports its exit status (0..255); one killed
// by signal N reports 128 + N, as a shell does (SIGINT: 130, SIGTERM: 143,
// SIGKILL: 137). A child whose command could not be started exits with 127.
#include <sys/types.h>

#include <filesystem>
#include <string>

#include "core/sanitizer_verdict.h"

namespace trainer::testing {

/// What a finished child left: its exit code (see above), stdout and stderr.
struct Run {
  int code;
  std::string out, err;
  long max_rss_kb = 0;  ///< The child's peak resident memory (getrusage's ru_maxrss), KiB.
};

/// The whole content of a file, as bytes; "" when it cannot be opened.
std::string slurp(const std::filesystem::path& p);

/// A fresh, empty folder <system temp>/trainer_<name>_<pid> (one left by an
/// earlier run of that name is removed first). The caller removes it.
std::filesystem::path temp_dir(const std::string& name);

/// A fresh, empty folder temp_dir(<name>_<n>), n counting up within the
/// process, removed with everything in it when the TempDir goes.
struct TempDir {
  std::filesystem::path root;
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

/// False in a build with AddressSanitizer, whose shadow memory and
/// quarantine of freed blocks swell a process's peak memory: tests then
/// leave out their bounds on Run::max_rss_kb.
constexpr bool kPeakMemoryMeasured = !kSanitizedBuild;

/// A child process started by start().
struct Child {
  pid_t pid;
};

/// Starts `binary args` through /bin/sh (args are split as the shell splits
/// them) with stdout into out and stderr into err (both truncated first),
/// and returns at once. The shell execs the binary, so signals sent to
/// Child::pid reach the binary itself.
Child start(const std::string& binary, const std::string& args, const std::filesystem::path& out,
            const std::filesystem::path& err);

/// Waits for the child to end and returns its exit code (see above);
/// max_rss_kb (when given) gets its peak resident memory in KiB.
int wait_exit(Child c, long* max_rss_kb = nullptr);

/// Runs `binary args` to its end with stdout into dir/stdout.txt and stderr
/// into dir/stderr.txt; returns its exit code and both texts.
Run run(const std::string& binary, const std::string& args, const std::filesystem::path& dir);

/// run() of the trainer binary of this build.
Run run_trainer(const std::string& args, const std::filesystem::path& dir);

/// The model section's layers of the two-level U-Net (width 8) at 64x64 that
/// the process tests train, from the Input to the last 3x3 convolution 'c3'
/// (YAML lines indented for `layers:`); the caller adds the output layers.
std::string small_unet_layers();

/// parent / name, emptied (removed and created again): a folder of its own
/// for one test case inside a shared fixture's folder.
std::filesystem::path fresh_subdir(const std::filesystem::path& parent, const std::string& name);

/// A config for a two-level U-Net (width 8) at 64x64 on the embedded sample
/// (data/sample, validation_split 0.2), seed 1, Adam with learning rate 0.01,
/// writing to output_dir. `training` holds further keys of the training
/// section, each line indented by two spaces (e.g. "  epochs: 4\n").
std::string sample_unet_config(const std::filesystem::path& output_dir, const std::string& training);

/// The Python that TRAINER_KERAS_PYTHON names (else python3) when it imports
/// keras and tensorflow (.ci/run makes a venv with them); "" otherwise, for
/// the caller to skip with a warning. dir: a scratch folder for the probe.
std::string keras_python(const std::filesystem::path& dir);

}  // namespace trainer::testing
