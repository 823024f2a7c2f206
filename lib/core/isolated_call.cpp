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
#include <optional>

#include "core/error.h"
#include "core/isolated_wire.h"
#include "core/memory_limit.h"
#include "core/sanitizer_verdict.h"

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

/// The child's address-space limit: what this process holds (/proc/self/statm) plus extra, or the caller's
/// own lower limit (callers_own); 0 bytes when statm cannot be read.
struct SpaceLimit {
  size_t bytes = 0;
  bool callers_own = false;
};

SpaceLimit space_limit(size_t extra) {
  SpaceLimit out;
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return out;
  unsigned long pages = 0;
  const bool ok = std::fscanf(f, "%lu", &pages) == 1;
  std::fclose(f);
  if (!ok) return out;
  out.bytes = size_t(pages) * size_t(sysconf(_SC_PAGESIZE)) + extra;
  rlimit now{};
  if (getrlimit(RLIMIT_AS, &now) == 0 && now.rlim_cur != RLIM_INFINITY && now.rlim_cur <= out.bytes) {
    out.bytes = size_t(now.rlim_cur);
    out.callers_own = true;
  }
  return out;
}

/// Makes this forked process a contained child (isolated_call.h); fd, its end of the pipe, is moved above
/// the standard streams (a caller started with them closed has its pipe there).
void become_child(pid_t parent, int& fd, const IsolationLimits& limits, const SpaceLimit& space) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // the caller ended before the line above
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_IGN);
  const bool sanitized = end_child_by_sanitizer_verdict();
  if (!sanitized) {  // a crash ends it with its signal, whatever handler the caller (a test framework) set
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) signal(sig, SIG_DFL);
  }
  if (const int moved = fcntl(fd, F_DUPFD, 3); moved >= 0) fd = moved;
  if (const int null_fd = open("/dev/null", O_WRONLY); null_fd >= 0) {
    dup2(null_fd, STDOUT_FILENO);
    if (!sanitized) dup2(null_fd, STDERR_FILENO);  // a sanitizer's report stays in sight
  }
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  const rlim_t cpu = rlim_t(std::ceil(limits.cpu_seconds));
  const rlimit cpu_limit{cpu, cpu + 1};  // SIGXCPU at the first, SIGKILL at the second
  setrlimit(RLIMIT_CPU, &cpu_limit);
  if (space.bytes > 0) {
    const rlimit space_limit{rlim_t(space.bytes), rlim_t(space.bytes)};
    setrlimit(RLIMIT_AS, &space_limit);
  }
}

/// The child's life after fork: contained (become_child), runs child, leaves with _exit: 0, or 3 when child threw.
[[noreturn]] void child_main(pid_t parent, int fd, const IsolationLimits& limits, const SpaceLimit& space,
                             const std::function<void(ChildSink&)>& child) {
  become_child(parent, fd, limits, space);
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

std::string printed(const char* format, double value) {
  char text[96];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

/// The failure a waitpid status other than exit 0 stands for; throws InternalError for a sanitizer's
/// report on our own code.
IsolatedCallFailed failure_of(int status, const IsolationLimits& limits) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const std::string name = "signal " + std::to_string(sig) + ", " + strsignal(sig);
    if (sig == SIGXCPU)
      return {printed("did not finish within %.0f s of processor time", std::ceil(limits.cpu_seconds)), true};
    if (sig == SIGKILL) return {"was killed (" + name + "), by the system's out-of-memory killer or by hand; free memory and try again",
              false};
    const bool crash = sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT ||
                       sig == SIGTRAP || sig == SIGSYS;
    return {(crash ? "crashed (" : "was stopped (") + name + ")", crash};
  }
  const int code = WEXITSTATUS(status);
  switch (sanitizer_verdict(code)) {
    case SanitizerVerdict::own_fault:
      throw InternalError("the reading process reported a memory error or undefined behaviour in trainer's own "
                          "code (the sanitizer's report is above)");
    case SanitizerVerdict::out_of_memory:
      return {"needs more than " + memory_size(limits.extra_bytes) + " of memory", true};
    case SanitizerVerdict::library_fault:
      return {"crashed (a memory error inside a system library; the sanitizer's report is above)", true};
    case SanitizerVerdict::none: break;
  }
  return {"exited with status " + std::to_string(code), false};
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

/// The child's waitpid status once it has ended, waiting until the deadline and then killing it; nullopt
/// when it cannot be waited for (SIGCHLD ignored: the system reaped it).
std::optional<int> reap(pid_t pid, double deadline, bool& killed) {
  for (;;) {
    int status = 0;
    const pid_t got = waitpid(pid, &status, killed ? 0 : WNOHANG);
    if (got == pid) return status;
    if (got < 0 && errno != EINTR) return std::nullopt;
    if (got == 0 && now_seconds() >= deadline) {
      kill(pid, SIGKILL);
      killed = true;
    } else if (got == 0) {
      const timespec pause{0, 5'000'000};
      nanosleep(&pause, nullptr);
    }
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

void ChildOutput::malformed(const std::string& what) const {
  throw InternalError("the reading process sent what does not parse: " + what);
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

/// Reaps the child after its output ended so, killing it first when it is still running or outlives the
/// deadline, and throws unless it delivered and exited with status 0.
void end_child(pid_t pid, Ending ending, double deadline, const IsolationLimits& limits) {
  bool killed = ending == Ending::timed_out || ending == Ending::sent_too_much;
  if (killed) kill(pid, SIGKILL);
  const std::optional<int> status = reap(pid, deadline, killed);
  if (ending == Ending::timed_out || (killed && ending == Ending::ended_early))
    throw IsolatedCallFailed(
        printed("did not finish within %.0f s; if the disk is slow or the job was suspended, try again",
                limits.wall_seconds),
        false);
  if (ending == Ending::sent_too_much) throw IsolatedCallFailed("sent more than it could hold", false);
  if (status && !(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)) throw failure_of(*status, limits);
  if (ending == Ending::ended_early) throw IsolatedCallFailed("exited without sending all it had to", false);
}

}  // namespace

void run_isolated(const IsolationLimits& limits, const std::function<void(ChildSink&)>& child,
                  const std::function<void(ChildOutput&)>& parent) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw InternalError(std::string("cannot make a pipe: ") + std::strerror(errno));
  const SpaceLimit space = space_limit(limits.extra_bytes);
  const pid_t self = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const std::string reason = std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    throw IsolatedCallFailed("could not be started (fork: " + reason +
                                 "); raise the limit on processes (ulimit -u) or free memory, and try again",
                             false);
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(self, fds[1], limits, space, child);
  }
  close(fds[1]);
  const double deadline = now_seconds() + limits.wall_seconds;
  ChildOutput output(fds[0], deadline, limits.extra_bytes);
  Ending ending = Ending::delivered;
  try {
    parent(output);
    ending = wait_for_end(fds[0], deadline);
  } catch (const PipeCut& cut) {
    ending = cut.why;
  } catch (...) {
    kill(pid, SIGKILL);
    bool killed = true;
    reap(pid, deadline, killed);
    close(fds[0]);
    throw;
  }
  close(fds[0]);
  end_child(pid, ending, deadline, limits);
}

void run_isolated_parser(const IsolationLimits& limits, const std::function<void()>& parse,
                         const std::function<void(ChildSink&)>& send, const std::function<void(ChildOutput&)>& receive) {
  // What the child answers first: the result follows (closed by kEnd), or why there is none.
  constexpr char kResult = 'R', kUserError = 'U', kOutOfMemory = 'M', kInternalError = 'I', kEnd = 'E';
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
          parse();
        } catch (const UserError& e) {
          return say(kUserError, e.what());
        } catch (const std::bad_alloc&) {
          return say(kOutOfMemory, "");
        } catch (const std::exception& e) {
          return say(kInternalError, e.what());
        }
        out.write(&kResult, 1);
        try {
          send(out);
          out.write(&kEnd, 1);
        } catch (...) {
          _exit(4);  // part of the result is on its way: no other answer can follow
        }
      },
      [&](ChildOutput& in) {
        in.read(&answer, 1);
        if (answer != kResult) {
          message = wire::take_text(in);
          return;
        }
        receive(in);
        if (wire::take<char>(in) != kEnd) in.malformed("no end mark after the result");
      });
  if (answer == kUserError) throw UserError(message);
  if (answer == kOutOfMemory) {
    const SpaceLimit space = space_limit(limits.extra_bytes);
    if (space.callers_own)
      throw IsolatedCallFailed(
          "needs more memory than this process's address-space limit (ulimit -v) leaves; raise it", false);
    throw IsolatedCallFailed("needs more than " + memory_size(limits.extra_bytes) + " of memory", true);
  }
  if (answer != kResult) throw InternalError(message);
}

}  // namespace trainer
