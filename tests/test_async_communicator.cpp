// The asynchronous CPU communicator (dist/async_communicator.h) that the
// multi-tower tests run under (`ctest -L multigpu`): its results are the
// in-process communicator's, a started reduction leaves the data alone until
// every rank has joined it, ranks that call different collectives and an
// abort end every rank's wait with an error, and TRAINER_TEST_ASYNC_COMM is
// read as documented.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/async_communicator.h"
#include "dist/local_communicator.h"

using namespace trainer;

namespace {

/// Runs fn(rank) on a thread per rank; returns each rank's error message ("" when none).
std::vector<std::string> on_ranks(int ranks, const std::function<void(int)>& fn) {
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

/// A rank's values for the collectives of `steps`: sums of floats and doubles, a broadcast, started reductions.
struct RankData {
  std::vector<float> f, started, bcast;
  std::vector<double> d;
  explicit RankData(int r)
      : f{0.1f * float(r + 1), 1e7f, -3.f * float(r)}, started{float(r), 0.25f * float(r * r), 1.f},
        bcast{float(r), float(-r)}, d{1e-3 * (r + 1), 1e15} {}
};

/// Every collective once, as the trainer issues them: two started sums, a blocking float and double sum, a
/// broadcast from rank 1 (rank 0 alone), the waits.
void run_collectives(Communicator& comm, int r, RankData& x) {
  const int t0 = comm.start_all_reduce_sum(r, x.started.data(), 2);
  const int t1 = comm.start_all_reduce_sum(r, x.started.data() + 2, 1);
  comm.wait(r, t1);
  comm.wait(r, t0);
  comm.all_reduce_sum(r, x.f.data(), x.f.size());
  comm.all_reduce_sum(r, x.d.data(), x.d.size());
  comm.broadcast(r, x.bcast.data(), x.bcast.size(), comm.size() > 1 ? 1 : 0);
  comm.wait_all(r);
}

}  // namespace

TEST_CASE("the asynchronous communicator gives the in-process communicator's bits, with delays", "[comm]") {
  for (int ranks : {1, 2, 3, 8}) {
    INFO(ranks << " ranks");
    std::vector<RankData> local, async;
    for (int r = 0; r < ranks; ++r) local.emplace_back(r), async.emplace_back(r);
    LocalCommunicator lc(ranks);
    AsyncCommunicator ac(ranks, AsyncCommOptions{300, 7});
    for (const std::string& e : on_ranks(ranks, [&](int r) { run_collectives(lc, r, local[size_t(r)]); })) CHECK(e == "");
    for (const std::string& e : on_ranks(ranks, [&](int r) { run_collectives(ac, r, async[size_t(r)]); })) CHECK(e == "");
    for (int r = 0; r < ranks; ++r) {
      CHECK(async[size_t(r)].f == local[size_t(r)].f);
      CHECK(async[size_t(r)].d == local[size_t(r)].d);
      CHECK(async[size_t(r)].started == local[size_t(r)].started);
      CHECK(async[size_t(r)].bcast == std::vector<float>{ranks > 1 ? 1.f : 0.f, ranks > 1 ? -1.f : 0.f});
    }
    if (ranks > 1) CHECK(async[0].f[0] != RankData(0).f[0]);  // a sum happened
  }
}

TEST_CASE("a started reduction leaves the data alone until it runs, and wait makes its sum visible", "[comm]") {
  AsyncCommunicator comm(2, AsyncCommOptions{});
  std::vector<float> a{1.f, 2.f}, b{10.f, 20.f};
  const int ticket = comm.start_all_reduce_sum(0, a.data(), 2);
  // Rank 1 has not joined: nothing can have run, so rank 0 reading now would see its own values (the
  // missing wait that the multi-tower tests catch as towers that disagree).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(a == std::vector<float>{1.f, 2.f});
  std::thread other([&] {
    comm.start_all_reduce_sum(1, b.data(), 2);
    comm.wait_all(1);
  });
  comm.wait(0, ticket);
  other.join();
  CHECK(a == std::vector<float>{11.f, 22.f});
  CHECK(b == a);
  CHECK_THROWS_WITH(comm.wait(0, 5), Catch::Contains("waits for ticket 5 of 1 started"));
}

TEST_CASE("started reductions and the other collectives run in two lanes, interleaved alike on every rank",
          "[comm]") {
  // As NCCL's two communicators: a started reduction (a gradient bucket) and a collective that returns at once
  // (a BN layer's sums) are ordered among their own kind only.
  AsyncCommunicator comm(2, AsyncCommOptions{100, 3});
  std::vector<std::vector<float>> bucket{{1.f}, {2.f}}, small{{3.f}, {4.f}};
  const auto errors = on_ranks(2, [&](int r) {
    const int ticket = comm.start_all_reduce_sum(r, bucket[size_t(r)].data(), 1);
    comm.all_reduce_sum(r, small[size_t(r)].data(), 1);
    comm.wait(r, ticket);
  });
  CHECK(errors == std::vector<std::string>{"", ""});
  CHECK(small[0] == std::vector<float>{7.f});
  CHECK(bucket[0] == std::vector<float>{3.f});
  CHECK(comm.history(0) == "sr");
  CHECK(comm.history(1) == "sr");
  // A rank that interleaves the kinds otherwise (under NCCL_LAUNCH_ORDER_IMPLICIT: a deadlock) is an error.
  std::vector<float> x{1.f};
  comm.start_all_reduce_sum(0, x.data(), 1);
  CHECK_THROWS_WITH(comm.all_reduce_sum(1, x.data(), 1),
                    Catch::Contains("call 2 is a collective on rank 1 and a started reduction on rank 0"));
}

TEST_CASE("ranks that call different collectives end every rank's call with an error naming both", "[comm]") {
  AsyncCommunicator comm(3, AsyncCommOptions{50, 1});
  const auto errors = on_ranks(3, [&](int r) {
    std::vector<float> x(5, 1.f);
    comm.all_reduce_sum(r, x.data(), 2);  // agreed
    if (r == 2) comm.broadcast(r, x.data(), 4, 0);
    else comm.all_reduce_sum(r, x.data(), 4);
    comm.all_reduce_sum(r, x.data(), 1);  // never reached by every rank
  });
  for (const std::string& e : errors) {
    CHECK_THAT(e, Catch::Contains("collective 1 differs between ranks"));
    CHECK_THAT(e, Catch::Contains("broadcast of 4 floats from rank 0"));
    CHECK_THAT(e, Catch::Contains("all_reduce_sum of 4 floats"));
  }
}

TEST_CASE("abort ends a rank's wait for a peer that never comes", "[comm]") {
  AsyncCommunicator comm(2, AsyncCommOptions{});
  std::vector<float> x{1.f};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    comm.abort("tower 1 failed: test");
  });
  CHECK_THROWS_WITH(comm.all_reduce_sum(0, x.data(), 1), Catch::Contains("aborted: tower 1 failed: test"));
  stopper.join();
  CHECK_THROWS_AS(comm.start_all_reduce_sum(1, x.data(), 1), InternalError);
}

TEST_CASE("TRAINER_TEST_ASYNC_COMM takes a delay and a seed, and names its form when wrong", "[comm]") {
  struct Restore {  // the variable as the test found it
    const char* was = std::getenv("TRAINER_TEST_ASYNC_COMM");
    std::string value = was ? was : "";
    ~Restore() { was ? setenv("TRAINER_TEST_ASYNC_COMM", value.c_str(), 1) : unsetenv("TRAINER_TEST_ASYNC_COMM"); }
  } restore;
  unsetenv("TRAINER_TEST_ASYNC_COMM");
  CHECK_FALSE(async_comm_from_env());
  setenv("TRAINER_TEST_ASYNC_COMM", "250", 1);
  REQUIRE(async_comm_from_env());
  CHECK(async_comm_from_env()->max_delay_us == 250);
  setenv("TRAINER_TEST_ASYNC_COMM", "0,42", 1);
  CHECK(async_comm_from_env()->seed == 42);
  for (const char* bad : {"fast", "-1", "100,", "100;3", "2e6"}) {
    setenv("TRAINER_TEST_ASYNC_COMM", bad, 1);
    CHECK_THROWS_WITH(async_comm_from_env(), Catch::Contains("TRAINER_TEST_ASYNC_COMM='" + std::string(bad) + "'"));
  }
}
