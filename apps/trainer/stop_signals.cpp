// SIGINT/SIGTERM/SIGHUP handling. Training: the first signal asks the run to stop
// after the current step, which rank 0 says at once once training has begun
// (it then writes last.h5 and exits with 128 + signal);
// a second SIGINT exits at once with 130, giving the command that continues
// from last.h5 when there is one. Export and predict: exit at once,
// saying so.
// Either way a temporary file being written is deleted first.
#include <signal.h>
#include <unistd.h>

#include "commands.h"
#include "io/atomic_file.h"

namespace trainer::cli {

namespace {
std::atomic<int> g_stop{0};
std::atomic<bool> g_announce{false};  ///< announce_stops() was called
// Set by announce_stops() before g_announce, never changed or freed after (so that a signal during the static
// destructors at exit does not read freed memory): the handler reads them.
const std::string* g_last = nullptr;  ///< The run's last.h5.
const std::string* g_hint = nullptr;  ///< "\ncontinue with: ... --resume <g_last>\n"
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");
static_assert(std::atomic<bool>::is_always_lock_free, "the handler needs a lock-free flag");

extern "C" void on_stop_signal(int sig) {
  if (sig == SIGINT && g_stop.load() != 0) {
    static const char msg[] = "\ninterrupted again: exiting now without a checkpoint (the last one stays)";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);  // write(2) and access(2) are async-signal-safe
    if (g_announce.load() && access(g_last->c_str(), F_OK) == 0)
      (void)!write(STDERR_FILENO, g_hint->data(), g_hint->size());
    else
      (void)!write(STDERR_FILENO, "\n", 1);
    remove_pending_temp();  // a checkpoint being written: its temporary file (unlink(2))
    _exit(130);
  }
  // Said at once: a step can take seconds, and silence invites the second Ctrl-C that skips the checkpoint.
  if (g_stop.exchange(sig) == 0 && g_announce.load()) {
    static const char interrupt[] = "\nstopping: finishing this step, then writing last.h5 (a second Ctrl-C exits "
                                    "at once, without it)\n";
    // SIGTERM: a scheduler's, or the launcher's when another process of the run ended (then it ends this one too).
    static const char term[] = "\nstopping on SIGTERM: finishing this step, then writing last.h5\n";
    // SIGHUP: the terminal or ssh session the run was started from closed (nohup or tmux keep it running).
    static const char hup[] = "\nstopping on SIGHUP (the terminal closed): finishing this step, then writing "
                              "last.h5\n";
    if (sig == SIGINT) (void)!write(STDERR_FILENO, interrupt, sizeof interrupt - 1);
    else if (sig == SIGHUP) (void)!write(STDERR_FILENO, hup, sizeof hup - 1);
    else (void)!write(STDERR_FILENO, term, sizeof term - 1);
  }
}
}  // namespace

/// Whether SIGHUP is ignored (nohup): then left so. (SIGINT and SIGTERM are handled whatever their state, as
/// a background job of a script, started with SIGINT ignored, must still stop on kill -INT.)
static bool hangup_ignored() {
  struct sigaction now {};
  return sigaction(SIGHUP, nullptr, &now) == 0 && now.sa_handler == SIG_IGN;
}

extern "C" void on_exit_signal(int sig) {
  remove_pending_temp();
  static const char msg[] = "\nstopped by a signal: every file written so far is complete; any file being "
                            "written was removed\n";
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
  _exit(128 + sig);
}

void announce_stops(const std::string& last, const std::string& continue_hint) {
  if (g_announce.load()) return;  // once: the strings are never replaced while the handler may read them
  g_last = new std::string(last);  // never freed (above)
  g_hint = new std::string("\n" + continue_hint + "\n");
  g_announce.store(true);
}

void install_exit_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_exit_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (!hangup_ignored()) sigaction(SIGHUP, &sa, nullptr);
}

const std::atomic<int>& install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;  // reads in loader threads resume instead of failing with EINTR
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (!hangup_ignored()) sigaction(SIGHUP, &sa, nullptr);
  return g_stop;
}

void ignore_file_size_signal() { signal(SIGXFSZ, SIG_IGN); }

}  // namespace trainer::cli
