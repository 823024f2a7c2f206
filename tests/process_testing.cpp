#include "process_testing.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
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

int wait_exit(Child c, long* max_rss_kb) {
  int status = 0;
  struct rusage usage {};
  while (wait4(c.pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  if (max_rss_kb) *max_rss_kb = usage.ru_maxrss;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Run run(const std::string& binary, const std::string& args, const fs::path& dir) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  long rss = 0;
  const int code = wait_exit(start(binary, args, out, err), &rss);
  return Run{code, slurp(out), slurp(err), rss};
}

Run run_trainer(const std::string& args, const fs::path& dir) { return run(TRAINER_BINARY, args, dir); }

std::string small_unet_layers() {
  return R"(    - {name: input, type: Input, shape: [64, 64, 3]}
    - {name: scale, type: Rescaling, scale: 0.00392156862745098}
    - {name: c1, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
    - {name: p1, type: MaxPooling2D}
    - {name: c2, type: Conv2D, filters: 16, kernel_size: 3, padding: same, activation: relu}
    - {name: u1, type: Conv2DTranspose, filters: 8, kernel_size: 2, strides: 2, padding: same}
    - {name: cat, type: Concatenate, inputs: [u1, c1]}
    - {name: c3, type: Conv2D, filters: 8, kernel_size: 3, padding: same, activation: relu}
)";
}

fs::path fresh_subdir(const fs::path& parent, const std::string& name) {
  const fs::path d = parent / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string sample_unet_config(const fs::path& output_dir, const std::string& training) {
  const std::string sample = std::string(TRAINER_SOURCE_DIR) + "/data/sample";
  return "model:\n  name: sample_unet\n  layers:\n" + small_unet_layers() +
         R"(    - {name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}
data:
  images: )" + sample + R"(/images
  masks: )" + sample + R"(/masks
  validation_split: 0.2
training:
  seed: 1
  optimizer: {type: Adam, learning_rate: 0.01}
  output_dir: )" + output_dir.string() + "\n" + training;
}

std::string keras_python(const std::filesystem::path& dir) {
  const char* env = std::getenv("TRAINER_KERAS_PYTHON");
  const std::string python = env && *env ? env : "python3";
  return run(python, "-c 'import keras, tensorflow'", fresh_subdir(dir, "probe")).code == 0 ? python : "";
}

}  // namespace trainer::testing
