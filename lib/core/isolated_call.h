#pragma once
// Running a parser of untrusted files in a process of its own. A library
// that crashes, loops or allocates without end on a damaged file (libhdf5
// does all three on some) takes only that process down: the caller gets an
// IsolatedCallFailed saying how it ended, bounded in time and memory, and
// turns it into a UserError naming the file.
//
// The child is a fork() of the caller. It must touch only what a forked
// process may: memory, files and the library it parses with; no threads,
// OpenMP, CUDA, MPI or logging. It ignores SIGINT, SIGTERM and SIGHUP (the
// caller's handlers decide what a stop means), is killed when the calling
// thread ends, dumps no core, writes nothing to stderr, and leaves with
// _exit (no atexit handlers, no flushing of the caller's buffers or files).
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>

namespace trainer {

/// Bounds of one isolated call.
struct IsolationLimits {
  double seconds = 60;                ///< Wall time of the whole call; the child is killed (SIGKILL) past it.
  size_t extra_bytes = size_t(1) << 30;  ///< Address space the child may add to what it inherits (RLIMIT_AS).
};

/// The child did not deliver: what() says how it ended, e.g. "crashed (signal 11, Segmentation fault)",
/// "did not finish within 20 s", "exited with status 1".
class IsolatedCallFailed : public std::runtime_error {
 public:
  explicit IsolatedCallFailed(const std::string& how) : std::runtime_error(how) {}
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
/// child ended early, the deadline passed, or the child sent more than
/// IsolationLimits::extra_bytes, more than it could hold: a parent
/// function lets what read() throws propagate.
class ChildOutput {
 public:
  void read(void* data, size_t bytes);
  /// Throws as read() does when the child may not send `bytes` more: a
  /// caller sizing a buffer from the child's word checks it before
  /// allocating.
  void check_room(size_t bytes) const;

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
/// IsolatedCallFailed when the child crashes, exits otherwise, outlives
/// limits.seconds (it is killed), or sends too little or too much; what
/// parent throws propagates (the child is killed first). An exception
/// escaping child ends it with status 3. Throws InternalError when the
/// pipe or process cannot be made.
void run_isolated(const IsolationLimits& limits, const std::function<void(ChildSink&)>& child,
                  const std::function<void(ChildOutput&)>& parent);

/// A reader of untrusted files, split for parse_isolated.
template <class T>
struct IsolatedParser {
  std::function<T()> parse;                         ///< Runs in the child; throws UserError for bad input.
  std::function<void(ChildSink&, const T&)> send;   ///< Writes parse's result (core/isolated_wire.h).
  std::function<T(ChildOutput&)> receive;           ///< Reads what send wrote, in the caller.
};

namespace isolated_detail {
/// The byte an isolated parser's child writes before its result; others say why there is none.
inline constexpr char kResultFollows = 'R';
}  // namespace isolated_detail

/// run_isolated for a parser with its answer: parse_and_send parses, then
/// writes kResultFollows and its result. The child's UserError is
/// thrown here as a UserError with its message (any other exception as an
/// InternalError); its std::bad_alloc, as its crashes, hangs and other
/// ends, as an IsolatedCallFailed ("needs more than 1.0 GiB of memory").
void run_isolated_parser(const IsolationLimits& limits, const std::function<void(ChildSink&)>& parse_and_send,
                         const std::function<void(ChildOutput&)>& receive);

/// Runs parser.parse in a process of its own (run_isolated) and returns its
/// result here; throws as run_isolated_parser.
template <class T>
T parse_isolated(const IsolationLimits& limits, const IsolatedParser<T>& parser) {
  T result{};
  run_isolated_parser(
      limits,
      [&](ChildSink& out) {
        const T value = parser.parse();
        out.write(&isolated_detail::kResultFollows, 1);
        parser.send(out, value);
      },
      [&](ChildOutput& in) { result = parser.receive(in); });
  return result;
}

}  // namespace trainer
