#pragma once
// Running a parser of untrusted files in a process of its own. A library
// that crashes, loops or allocates without end on a damaged file (libhdf5
// does all three on some) takes only that process down: the caller gets an
// IsolatedCallFailed saying how it ended, bounded in processor time, wall
// time and memory, and turns it into a UserError naming the file. This
// contains a library's failures; it is no security boundary (the child runs
// as the user, with the caller's open files).
//
// The child is a fork() of the caller. It must touch only what a forked
// process may: memory, files and the library it parses with; no threads,
// OpenMP, CUDA, MPI or logging. Call from the thread that uses that library
// (libhdf5: no other thread may be inside it during the fork, or the child
// waits on its lock until the wall time ends it). The child ignores SIGINT,
// SIGTERM and SIGHUP (the caller's handlers decide what a stop means), is
// killed when the calling thread ends, dumps no core, writes nothing to
// stdout or stderr, and leaves with _exit (no atexit handlers, no flushing
// of the caller's buffers or files). In a build with sanitizers, a report
// whose faulting frame is in a system library counts as that library's
// crash; any other is shown and thrown here as an InternalError, so that
// fuzzing and the tests still see our own defects.
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>

namespace trainer {

/// Bounds of one isolated call.
struct IsolationLimits {
  /// Processor time of the child (RLIMIT_CPU, whole seconds): a parser that loops ends here. Time
  /// suspended or waiting for a disk does not count.
  double cpu_seconds = 20;
  /// Wall time of the whole call, past which the child is killed: a backstop for a child that waits
  /// without end, generous since a slow disk or a suspended job is no fault of the input.
  double wall_seconds = 600;
  /// Address space the child may add to what it inherits (RLIMIT_AS; a lower limit of the caller's own,
  /// ulimit -v, stays). Not applied where /proc/self/statm cannot be read.
  size_t extra_bytes = size_t(1) << 30;
};

/// The child did not deliver. what() says how it ended, e.g. "crashed (signal 11, Segmentation fault)",
/// "did not finish within 10 s of processor time", "needs more than 1.00 GiB of memory", "was killed
/// (signal 9, Killed)", "did not finish within 600 s", "could not be started (fork: ...)".
class IsolatedCallFailed : public std::runtime_error {
 public:
  IsolatedCallFailed(const std::string& how, bool input_at_fault)
      : std::runtime_error(how), input_at_fault(input_at_fault) {}
  /// True when the input made the parser fail (a crash, its processor time or memory limit); false when
  /// the machine did (a process that could not start, a kill from outside, the wall time, the caller's own
  /// memory limit): then the same input may be read on another try.
  bool input_at_fault;
};

/// The child's end of the pipe: buffered writes, flushed by flush() (a
/// write to a parent that stopped reading fails silently: the child is
/// about to be killed).
class ChildSink {
 public:
  explicit ChildSink(int fd) : fd_(fd) {}
  void write(const void* data, size_t bytes);
  void flush();

 private:
  int fd_;
  std::string buffer_;
};

/// The parent's end of the pipe. read() fills exactly `bytes`, or throws
/// to run_isolated (which turns it into an IsolatedCallFailed) when the
/// child ended early, the wall time passed, or the child sent more than
/// IsolationLimits::extra_bytes, more than it could hold: a parent
/// function lets what read() throws propagate.
class ChildOutput {
 public:
  void read(void* data, size_t bytes);
  /// Throws as read() does when the child may not send `bytes` more: a
  /// caller sizing a buffer from the child's word checks it first (counting
  /// the bytes the items will take in memory, not on the wire).
  void check_room(size_t bytes) const;
  /// Throws InternalError through run_isolated: what the child sent does not parse.
  [[noreturn]] void malformed(const std::string& what) const;

 private:
  friend void run_isolated(const IsolationLimits&, const std::function<void(ChildSink&)>&,
                           const std::function<void(ChildOutput&)>&);
  ChildOutput(int fd, double deadline, size_t allowance) : fd_(fd), deadline_(deadline), allowance_(allowance) {}
  int fd_;
  double deadline_;  ///< CLOCK_MONOTONIC seconds.
  size_t allowance_;
};

/// Runs child(sink) in a forked process and parent(output) in this one,
/// reading what the child writes. Returns when parent has returned, the
/// child has sent nothing more and has exited with status 0. Throws
/// IsolatedCallFailed when the child cannot start, crashes, exits
/// otherwise, outgrows a limit (it is killed), or sends too little or too
/// much; InternalError for a sanitizer's report on our own code (see
/// above) or a pipe that cannot be made; what parent throws propagates (the
/// child is killed first). An exception escaping child ends it with status 3.
void run_isolated(const IsolationLimits& limits, const std::function<void(ChildSink&)>& child,
                  const std::function<void(ChildOutput&)>& parent);

/// A reader of untrusted files, split for parse_isolated.
template <class T>
struct IsolatedParser {
  std::function<T()> parse;                        ///< Runs in the child; throws UserError for bad input.
  std::function<void(ChildSink&, const T&)> send;  ///< Writes parse's result (core/isolated_wire.h).
  std::function<T(ChildOutput&)> receive;          ///< Reads what send wrote, in the caller.
};

/// run_isolated for a parser with its answer: the child runs parse, then
/// send. A UserError parse throws is thrown here as a UserError with its
/// message, any other exception as an InternalError; its std::bad_alloc,
/// as the child's crashes, hangs and other ends, as an IsolatedCallFailed
/// ("needs more than 1.00 GiB of memory", input_at_fault). A child that
/// fails while sending ends without the closing mark, and is reported so.
void run_isolated_parser(const IsolationLimits& limits, const std::function<void()>& parse,
                         const std::function<void(ChildSink&)>& send, const std::function<void(ChildOutput&)>& receive);

/// Runs parser.parse in a process of its own (run_isolated) and returns its
/// result here; throws as run_isolated_parser.
template <class T>
T parse_isolated(const IsolationLimits& limits, const IsolatedParser<T>& parser) {
  T parsed{}, result{};
  run_isolated_parser(
      limits, [&] { parsed = parser.parse(); }, [&](ChildSink& out) { parser.send(out, parsed); },
      [&](ChildOutput& in) { result = parser.receive(in); });
  return result;
}

}  // namespace trainer
