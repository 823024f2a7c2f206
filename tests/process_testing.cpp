#include "process_testing.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace trainer::testing {

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("trainer_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TempDir::TempDir(const std::string& name) {
  static std::atomic<int> counter{0};
  root = temp_dir(name + "_" + std::to_string(counter++));
}

TempDir::~TempDir() { fs::remove_all(root); }

Child start(const std::string& binary, const std::string& args, const fs::path& out, const fs::path& err) {
  const std::string cmd = "exec " + binary + " " + args + " > " + out.string() + " 2> " + err.string();
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return Child{pid};
}

int wait_exit(Child c) {
  int status = 0;
  while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Run run(const std::string& binary, const std::string& args, const fs::path& dir) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const int code = wait_exit(start(binary, args, out, err));
  return Run{code, slurp(out), slurp(err)};
}

Run run_trainer(const std::string& args, const fs::path& dir) { return run(TRAINER_BINARY, args, dir); }

}  // namespace trainer::testing
