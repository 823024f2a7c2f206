// run_isolated: what a child sends arrives whole; a child that crashes,
// hangs, exits early, sends too little or too much, or outgrows its memory
// ends in an IsolatedCallFailed (or its own answer) within the limits, and
// the caller goes on.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "core/isolated_call.h"

using namespace trainer;

namespace {

/// The message of the IsolatedCallFailed that run_isolated throws, "" when it returns.
std::string failure_of(const IsolationLimits& limits, const std::function<void(ChildSink&)>& child,
                       const std::function<void(ChildOutput&)>& parent) {
  try {
    run_isolated(limits, child, parent);
  } catch (const IsolatedCallFailed& e) {
    return e.what();
  }
  return "";
}

void read_nothing(ChildOutput&) {}

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
  CHECK(failure_of({}, [](ChildSink&) { std::abort(); }, read_nothing) == "crashed (signal 6, Aborted)");
  CHECK(failure_of({}, [](ChildSink&) { _exit(5); }, read_nothing) == "exited with status 5");
  CHECK(failure_of({}, [](ChildSink&) { throw std::runtime_error("x"); }, read_nothing) == "exited with status 3");
  // Ctrl-C reaches the whole process group: the child leaves stopping to its caller.
  CHECK(failure_of({}, [](ChildSink&) { raise(SIGINT); }, read_nothing).empty());
}

TEST_CASE("an isolated child that sends too little or too much is reported", "[isolated]") {
  int value = 0;
  auto read_int = [&](ChildOutput& in) { in.read(&value, sizeof value); };
  CHECK(failure_of({}, [](ChildSink& out) { out.write("ab", 2); }, read_int) ==
        "exited without sending all it had to");
  CHECK(failure_of({}, [](ChildSink& out) { out.write("abcdefgh", 8); }, read_int) ==
        "sent more than it could hold");
  IsolationLimits small;
  small.extra_bytes = 64 << 20;
  CHECK(failure_of(small, [](ChildSink&) {}, [](ChildOutput& in) { in.check_room(65 << 20); }) ==
        "sent more than it could hold");
}

TEST_CASE("an isolated child that hangs is killed at the time limit", "[isolated]") {
  IsolationLimits limits;
  limits.seconds = 0.5;
  const auto start = std::chrono::steady_clock::now();
  CHECK(failure_of(limits, [](ChildSink&) { sleep(60); }, read_nothing) == "did not finish within 0.5 s");
  char byte = 0;
  CHECK(failure_of(limits, [](ChildSink&) { sleep(60); }, [&](ChildOutput& in) { in.read(&byte, 1); }) ==
        "did not finish within 0.5 s");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("an isolated child cannot hold more memory than its limit", "[isolated]") {
  IsolationLimits limits;
  limits.extra_bytes = 256 << 20;
  char answer = 0;
  const std::string failure = failure_of(
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
  // Without sanitizers the allocation fails in the child; under AddressSanitizer its allocator ends the child.
  CHECK((failure.empty() ? answer == 'r' : failure.find("exited with status") == 0));
}

TEST_CASE("what the caller's side throws comes through, and the child is stopped", "[isolated]") {
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(run_isolated({}, [](ChildSink&) { sleep(60); },
                                 [](ChildOutput&) { throw std::runtime_error("caller failed"); }),
                    "caller failed");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}
