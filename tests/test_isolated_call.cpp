// run_isolated: what a child sends arrives whole; a child that crashes,
// loops, waits, exits early, sends too little or too much, or outgrows its
// memory ends in an IsolatedCallFailed (input at fault or not) within the
// limits, and the caller goes on with no process or file left behind.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/isolated_call.h"
#include "core/isolated_wire.h"
#include "core/sanitizer_verdict.h"
#include "process_testing.h"

using namespace trainer;

namespace {

/// How run_isolated ended: how = "" when it returned.
struct Outcome {
  std::string how;
  bool input_at_fault = false;
};

Outcome outcome_of(const IsolationLimits& limits, const std::function<void(ChildSink&)>& child,
                   const std::function<void(ChildOutput&)>& parent) {
  try {
    run_isolated(limits, child, parent);
  } catch (const IsolatedCallFailed& e) {
    return {e.what(), e.input_at_fault};
  }
  return {};
}

void read_nothing(ChildOutput&) {}

size_t open_files() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) n += e.path().filename() != "." ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("what an isolated child sends arrives whole, across many pipe buffers", "[isolated]") {
  std::vector<int> sent(3 << 20);
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = int(i * 7);
  std::vector<int> got(sent.size());
  run_isolated({}, [&](ChildSink& out) { out.write(sent.data(), sent.size() * sizeof(int)); },
               [&](ChildOutput& in) { in.read(got.data(), got.size() * sizeof(int)); });
  CHECK(got == sent);
}

TEST_CASE("an isolated child that crashes or exits otherwise is reported, and the caller goes on", "[isolated]") {
  const Outcome crash = outcome_of({}, [](ChildSink&) { std::abort(); }, read_nothing);
  CHECK(crash.how == "crashed (signal 6, Aborted)");
  CHECK(crash.input_at_fault);
  const Outcome exited = outcome_of({}, [](ChildSink&) { _exit(5); }, read_nothing);
  CHECK(exited.how == "exited with status 5");
  CHECK_FALSE(exited.input_at_fault);
  CHECK(outcome_of({}, [](ChildSink&) { throw std::runtime_error("x"); }, read_nothing).how == "exited with status 3");
  // Ctrl-C reaches the whole process group: the child leaves stopping to its caller.
  CHECK(outcome_of({}, [](ChildSink&) { raise(SIGINT); }, read_nothing).how.empty());
}

TEST_CASE("an isolated child that sends too little or too much is reported", "[isolated]") {
  int value = 0;
  auto read_int = [&](ChildOutput& in) { in.read(&value, sizeof value); };
  CHECK(outcome_of({}, [](ChildSink& out) { out.write("ab", 2); }, read_int).how ==
        "exited without sending all it had to");
  CHECK(outcome_of({}, [](ChildSink& out) { out.write("abcdefgh", 8); }, read_int).how ==
        "sent more than it could hold");
  IsolationLimits small;
  small.extra_bytes = 64 << 20;
  CHECK(outcome_of(small, [](ChildSink&) {}, [](ChildOutput& in) { in.check_room(65 << 20); }).how ==
        "sent more than it could hold");
}

TEST_CASE("an isolated child that loops is ended by its processor time, one that waits by the wall time",
          "[isolated]") {
  IsolationLimits limits;
  limits.cpu_seconds = 1;
  limits.wall_seconds = 30;
  const auto start = std::chrono::steady_clock::now();
  const Outcome looped = outcome_of(
      limits,
      [](ChildSink&) {
        for (volatile unsigned long i = 0;; i = i + 1) {
        }
      },
      read_nothing);
  CHECK(looped.how == "did not finish within 1 s of processor time");
  CHECK(looped.input_at_fault);
  limits.cpu_seconds = 20;
  limits.wall_seconds = 1;
  const std::string waited = "did not finish within 1 s; if the disk is slow or the job was suspended, try again";
  const Outcome slept = outcome_of(limits, [](ChildSink&) { sleep(60); }, read_nothing);
  CHECK(slept.how == waited);
  CHECK_FALSE(slept.input_at_fault);
  char byte = 0;
  CHECK(outcome_of(limits, [](ChildSink&) { sleep(60); }, [&](ChildOutput& in) { in.read(&byte, 1); }).how == waited);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(25));
}

TEST_CASE("an isolated child cannot hold more memory than its limit", "[isolated]") {
  IsolationLimits limits;
  limits.extra_bytes = 256 << 20;
  char answer = 0;
  const Outcome o = outcome_of(
      limits,
      [](ChildSink& out) {
        try {
          std::vector<char> big(size_t(2) << 30, 1);
          out.write(&big.back(), 1);  // uses it: the allocation cannot be left out
        } catch (const std::bad_alloc&) {
          out.write("refused", 1);
        }
      },
      [&](ChildOutput& in) { in.read(&answer, 1); });
  // Without sanitizers the allocation fails in the child; under AddressSanitizer its allocator ends it.
  if (trainer::kSanitizedBuild)
    CHECK((o.how == "needs more than 256 MiB of memory" && o.input_at_fault));
  else
    CHECK((o.how.empty() && answer == 'r'));
}

TEST_CASE("what the caller's side throws comes through, and the child is stopped", "[isolated]") {
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(run_isolated({}, [](ChildSink&) { sleep(60); },
                                 [](ChildOutput&) { throw std::runtime_error("caller failed"); }),
                    "caller failed");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("an isolated parser's result, user error, internal error and lack of memory reach the caller",
          "[isolated]") {
  auto parser = [](std::function<std::string()> parse) {
    return IsolatedParser<std::string>{parse, wire::put_text, wire::take_text};
  };
  CHECK(parse_isolated<std::string>({}, parser([] { return std::string(100000, 'x'); })) == std::string(100000, 'x'));
  CHECK_THROWS_MATCHES(parse_isolated<std::string>({}, parser([]() -> std::string { throw UserError("bad file"); })),
                       UserError, Catch::Message("bad file"));
  CHECK_THROWS_MATCHES(
      parse_isolated<std::string>({}, parser([]() -> std::string { throw std::runtime_error("our bug"); })),
      InternalError, Catch::Message("our bug"));
  try {
    parse_isolated<std::string>({}, parser([]() -> std::string { throw std::bad_alloc(); }));
    FAIL("no failure");
  } catch (const IsolatedCallFailed& e) {
    CHECK(std::string(e.what()) == "needs more than 1.00 GiB of memory");
    CHECK(e.input_at_fault);
  }
  // A child that fails while sending its result cannot say so: it ends without the closing mark.
  IsolatedParser<std::string> failing_send = parser([] { return std::string("x"); });
  failing_send.send = [](ChildSink& out, const std::string&) {
    out.write("\0\0", 2);
    throw std::bad_alloc();
  };
  CHECK_THROWS_AS(parse_isolated<std::string>({}, failing_send), IsolatedCallFailed);
}

TEST_CASE("isolated calls leave no open file or unreaped process, also with stdin and stdout closed",
          "[isolated]") {
  const size_t files = open_files();
  for (int i = 0; i < 3; ++i) {
    outcome_of({}, [](ChildSink&) { std::abort(); }, read_nothing);
    outcome_of({}, [](ChildSink& out) { out.write("abcdefgh", 8); }, read_nothing);
  }
  // A caller started with its standard streams closed gets them as its pipe's ends.
  const int saved_in = dup(STDIN_FILENO), saved_out = dup(STDOUT_FILENO);
  close(STDIN_FILENO);
  close(STDOUT_FILENO);
  int value = 0;
  const Outcome o = outcome_of({}, [](ChildSink& out) { out.write("abcd", 4); },
                               [&](ChildOutput& in) { in.read(&value, sizeof value); });
  dup2(saved_in, STDIN_FILENO);
  dup2(saved_out, STDOUT_FILENO);
  close(saved_in);
  close(saved_out);
  CHECK(o.how.empty());
  CHECK(value == 0x64636261);
  CHECK(open_files() == files);
  int status = 0;
  CHECK(waitpid(-1, &status, WNOHANG) == -1);
}

TEST_CASE("a sanitizer's report is laid at the door of the code of its first frame past the runtimes",
          "[isolated]") {
  // As AddressSanitizer printed them for libhdf5's overflow (tests/fuzz/README.md) and for our own code.
  const char* library_overflow =
      "==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x60e0002a2958\n"
      "    #0 0x56407cde1803 in __interceptor_memcpy (/tmp/fuzz_checkpoint+0xb9803) (BuildId: 62)\n"
      "    #1 0x7f07bd390f18  (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x190f18) (BuildId: e9)\n"
      "    #2 0x7f07bd3b4ca4 in H5O__msg_iterate_real (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x1b4ca4)\n"
      "    #3 0x56407cebe3aa in trainer::h5::attribute_names(long) /work/main/lib/io/hdf5_util.cpp:185:7\n";
  const char* library_segv =
      "==2==ERROR: AddressSanitizer: SEGV on unknown address 0x60e0002e0618\n"
      "    #0 0x7f07b9d70b00 in __memcpy_avx_unaligned_erms string/../sysdeps/x86_64/multiarch/memmove.S:372\n"
      "    #1 0x56407cde1977 in __interceptor_memcpy (/tmp/fuzz_checkpoint+0xb9977) (BuildId: 62)\n"
      "    #2 0x7f07bd390f18  (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x190f18) (BuildId: e9)\n";
  const char* library_plain_interceptor =  // the runtime's memcpy unnamed as an interceptor
      "==5==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x60e00028e918\n"
      "    #0 0x55b913634b43 in memcpy (/tmp/ci/build-san/tests/unit_tests+0xe59b43) (BuildId: 56)\n"
      "    #1 0x7f4a37390f18  (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x190f18) (BuildId: e9)\n"
      "    #8 0x55b9149ac85a in trainer::h5::attribute_names(long) /tmp/ci/lib/io/hdf5_util.cpp:185:7\n";
  const char* own =
      "==3==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x60e0002a2958\n"
      "    #0 0x7f07be6a8e19 in std::string::_M_append (/lib/x86_64-linux-gnu/libstdc++.so.6+0xa8e19)\n"
      "    #1 0x56407cebe3aa in trainer::h5::attribute_names(long) /work/main/lib/io/hdf5_util.cpp:185:7\n"
      "    #2 0x7f07bd25b12e in H5Aiterate2 (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x5b12e)\n";
  const char* memory =
      "==4==ERROR: AddressSanitizer: allocator is out of memory trying to allocate 0x80000000 bytes\n"
      "    #0 0x55b9318fe18d in operator new(unsigned long) (/work/main/build-san/tests/unit_tests+0xef818d)\n";
  CHECK(verdict_of_report(library_overflow) == SanitizerVerdict::library_fault);
  CHECK(verdict_of_report(library_segv) == SanitizerVerdict::library_fault);
  CHECK(verdict_of_report(library_plain_interceptor) == SanitizerVerdict::library_fault);
  CHECK(verdict_of_report(own) == SanitizerVerdict::own_fault);
  CHECK(verdict_of_report(memory) == SanitizerVerdict::out_of_memory);
  CHECK(sanitizer_verdict(0) == SanitizerVerdict::none);
}
