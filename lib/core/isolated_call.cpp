#include "core/isolated_call.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/isolated_wire.h"
#include "core/memory_limit.h"

// A sanitizer's report in the child would otherwise run the death callback of the
// process it was forked from (libFuzzer's saves the input as a crash of the harness).
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace trainer {

namespace {

/// How the child's output ended.
enum class Ending { delivered, ended_early, timed_out, sent_too_much };

/// Thrown by ChildOutput::read to run_isolated, through the caller's parent function.
struct PipeCut {
  Ending why;
};

double now_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

/// This process's address space in bytes (/proc/self/statm's first field), 0 when unknown.
size_t address_space_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long pages = 0;
  const bool ok = std::fscanf(f, "%lu", &pages) == 1;
  std::fclose(f);
  return ok ? size_t(pages) * size_t(sysconf(_SC_PAGESIZE)) : 0;
}

/// Makes this forked process a contained child (isolated_call.h).
void become_child(pid_t parent, size_t extra_bytes) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // the caller ended before the line above
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_IGN);
  // A crash ends this process with its signal, whatever handler the caller (a test framework, a
  // sanitizer) set to report its own crashes.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) signal(sig, SIG_DFL);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
  const int null_fd = open("/dev/null", O_WRONLY);
  if (null_fd >= 0) {
    dup2(null_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
  }
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  if (const size_t now = address_space_bytes(); now > 0) {
    const rlimit space{rlim_t(now + extra_bytes), rlim_t(now + extra_bytes)};
    setrlimit(RLIMIT_AS, &space);
  }
}

/// "crashed (signal 11, Segmentation fault)" or "exited with status 1" from a waitpid status.
std::string how_it_ended(int status) {
  if (WIFSIGNALED(status))
    return "crashed (signal " + std::to_string(WTERMSIG(status)) + ", " + strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

/// Reads until the child closes its end, as a child that exits does: delivered, or timed_out when the deadline
/// passes first, or sent_too_much when more bytes come.
Ending wait_for_end(int fd, double deadline) {
  for (;;) {
    const double left = deadline - now_seconds();
    pollfd p{fd, POLLIN, 0};
    const int ready = left > 0 ? poll(&p, 1, int(std::ceil(left * 1000))) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return Ending::timed_out;
    char byte;
    const ssize_t got = ::read(fd, &byte, 1);
    if (got < 0 && errno == EINTR) continue;
    return got == 0 ? Ending::delivered : Ending::sent_too_much;
  }
}

void write_fully(int fd, const char* data, size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::write(fd, data, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the caller stopped reading and is about to kill this process
    data += n;
    bytes -= size_t(n);
  }
}

}  // namespace

void ChildSink::write(const void* data, size_t bytes) {
  constexpr size_t kBuffered = size_t(1) << 20;
  if (buffer_.size() + bytes > kBuffered) flush();
  if (bytes >= kBuffered)
    write_fully(fd_, static_cast<const char*>(data), bytes);
  else
    buffer_.append(static_cast<const char*>(data), bytes);
}

void ChildSink::flush() {
  write_fully(fd_, buffer_.data(), buffer_.size());
  buffer_.clear();
}

void ChildOutput::check_room(size_t bytes) const {
  if (bytes > allowance_) throw PipeCut{Ending::sent_too_much};
}

void ChildOutput::read(void* data, size_t bytes) {
  check_room(bytes);
  char* out = static_cast<char*>(data);
  while (bytes > 0) {
    const double left = deadline_ - now_seconds();
    pollfd p{fd_, POLLIN, 0};
    const int ready = left > 0 ? poll(&p, 1, int(std::ceil(left * 1000))) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) throw PipeCut{Ending::timed_out};
    const ssize_t got = ::read(fd_, out, bytes);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw PipeCut{Ending::ended_early};
    out += got;
    bytes -= size_t(got);
    allowance_ -= size_t(got);
  }
}

namespace {

/// The child's life after fork: contained (become_child), runs child, leaves with _exit: 0, or 3 when child threw.
[[noreturn]] void child_main(pid_t parent, int fd, const IsolationLimits& limits,
                             const std::function<void(ChildSink&)>& child) {
  become_child(parent, limits.extra_bytes);
  int code = 0;
  try {
    ChildSink sink(fd);
    child(sink);
    sink.flush();
  } catch (...) {
    code = 3;
  }
  _exit(code);
}

/// Reaps the child after its output ended so, killing it first when it is still running, and throws
/// IsolatedCallFailed unless it delivered and exited with status 0.
void end_child(pid_t pid, Ending ending, const IsolationLimits& limits) {
  if (ending == Ending::timed_out || ending == Ending::sent_too_much) kill(pid, SIGKILL);
  const int status = reap(pid);
  if (ending == Ending::timed_out) {
    char text[64];
    std::snprintf(text, sizeof text, "did not finish within %g s", limits.seconds);
    throw IsolatedCallFailed(text);
  }
  if (ending == Ending::sent_too_much) throw IsolatedCallFailed("sent more than it could hold");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw IsolatedCallFailed(how_it_ended(status));
  if (ending == Ending::ended_early) throw IsolatedCallFailed("exited without sending all it had to");
}

}  // namespace

void run_isolated(const IsolationLimits& limits, const std::function<void(ChildSink&)>& child,
                  const std::function<void(ChildOutput&)>& parent) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw InternalError(std::string("cannot make a pipe: ") + std::strerror(errno));
  const pid_t self = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    throw InternalError(std::string("cannot start a process (fork): ") + std::strerror(err));
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(self, fds[1], limits, child);
  }
  close(fds[1]);
  const double deadline = now_seconds() + limits.seconds;
  ChildOutput output(fds[0], deadline, limits.extra_bytes);
  Ending ending = Ending::delivered;
  try {
    parent(output);
    ending = wait_for_end(fds[0], deadline);
  } catch (const PipeCut& cut) {
    ending = cut.why;
  } catch (...) {
    kill(pid, SIGKILL);
    reap(pid);
    close(fds[0]);
    throw;
  }
  close(fds[0]);
  end_child(pid, ending, limits);
}

void run_isolated_parser(const IsolationLimits& limits, const std::function<void(ChildSink&)>& parse_and_send,
                         const std::function<void(ChildOutput&)>& receive) {
  constexpr char kUserError = 'U', kOutOfMemory = 'M', kInternalError = 'I';
  char answer = 0;
  std::string message;
  run_isolated(
      limits,
      [&](ChildSink& out) {
        auto say = [&](char tag, const std::string& text) {
          out.write(&tag, 1);
          wire::put_text(out, text);
        };
        try {
          parse_and_send(out);  // throws before it writes: parsing comes first
        } catch (const UserError& e) {
          say(kUserError, e.what());
        } catch (const std::bad_alloc&) {
          say(kOutOfMemory, "");
        } catch (const std::exception& e) {
          say(kInternalError, e.what());
        }
      },
      [&](ChildOutput& in) {
        in.read(&answer, 1);
        if (answer == isolated_detail::kResultFollows)
          receive(in);
        else
          message = wire::take_text(in);
      });
  if (answer == kUserError) throw UserError(message);
  if (answer == kOutOfMemory) throw IsolatedCallFailed("needs more than " + memory_size(limits.extra_bytes) + " of memory");
  if (answer != isolated_detail::kResultFollows) throw InternalError(message);
}

}  // namespace trainer
