// The launch detection and the two-level world communicator, in one process:
// an MPI launcher's environment through a fake getenv, and the other
// processes of a world through a fake ProcessGroup that adds their known
// contributions (test_mpi_runs.cpp runs real processes under mpirun).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "dist/local_communicator.h"
#include "dist/process_group.h"
#include "dist/root_work.h"
#include "dist/world_communicator.h"
#include "train/tower_devices.h"

using namespace trainer;

namespace {

std::map<std::string, std::string> g_env;

const char* fake_env(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

/// This process as rank 0 of two; the other process adds `other` to every sum, and a broadcast from rank 0
/// leaves this process's values. Counts the calls, which only this process's tower 0 may make.
class FakeGroup : public ProcessGroup {
 public:
  std::vector<double> other;  ///< The other process's values in every sum.
  std::string gathered = "other";  ///< The other process's text in every all_gather.
  int calls = 0;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  const std::string& host() const override { return host_; }
  void all_reduce_sum(float* data, size_t n) override {
    ++calls;
    for (size_t i = 0; i < n; ++i) data[i] += float(other[i]);
  }
  void all_reduce_sum(double* data, size_t n) override {
    ++calls;
    for (size_t i = 0; i < n; ++i) data[i] += other[i];
  }
  void all_reduce_max(double* data, size_t n) override {
    ++calls;
    for (size_t i = 0; i < n; ++i) data[i] = std::max(data[i], other[i]);
  }
  void broadcast(void*, size_t, int) override { ++calls; }
  std::vector<std::string> all_gather(const std::string& text) override {
    ++calls;
    return {text, gathered};
  }

 private:
  std::string host_ = "here";
};

/// What fn writes on stderr (file descriptor 2).
std::string stderr_of(const std::function<void()>& fn) {
  std::fflush(stderr);
  std::FILE* file = std::tmpfile();
  const int saved = dup(2);
  dup2(fileno(file), 2);
  fn();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::rewind(file);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) text += char(c);
  std::fclose(file);
  return text;
}

/// Runs fn(rank) on `towers` threads at once.
template <class F>
void on_towers(int towers, F fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < towers; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

}  // namespace

TEST_CASE("an MPI launcher is recognised from its environment", "[mpi]") {
  g_env.clear();
  CHECK_FALSE(detect_launch(fake_env).by_launcher);
  g_env = {{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}};
  Launch l = detect_launch(fake_env);
  CHECK(l.by_launcher);
  CHECK(l.size == 2);
  CHECK(l.source == "OMPI_COMM_WORLD_SIZE=2");
  CHECK(l.rank == 1);
  // srun's tasks: a job step of 4 tasks, with or without PMIx.
  g_env = {{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "3"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_STEP_ID", "0"}};
  l = detect_launch(fake_env);
  CHECK(l.by_launcher);
  CHECK(l.size == 4);
  g_env["PMIX_RANK"] = "3";
  l = detect_launch(fake_env);
  CHECK(l.by_launcher);
  CHECK(l.size == 4);
  CHECK(l.source == "PMIX_RANK=3, SLURM_STEP_NUM_TASKS=4");
  CHECK(l.rank == 3);
  // sbatch's own shell of a 4-task job (SLURM_PROCID 0, no step): a command there is a plain run.
  g_env = {{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "0"}};
  CHECK_FALSE(detect_launch(fake_env).by_launcher);
  g_env = {{"SLURM_NTASKS", "1"}, {"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}};  // a one-task step
  CHECK_FALSE(detect_launch(fake_env).by_launcher);
  g_env = {{"PMIX_RANK", "0"}};  // a PMIx launcher that names no size
  l = detect_launch(fake_env);
  CHECK(l.by_launcher);
  CHECK(l.size == 1);
  g_env = {{"OMPI_COMM_WORLD_SIZE", "two"}};  // not a count: not taken as a launch
  CHECK_FALSE(detect_launch(fake_env).by_launcher);
  g_env.clear();
}

TEST_CASE("the world communicator sums this process's towers, then the processes, and hands every tower the sum",
          "[mpi]") {
  for (int towers : {1, 3}) {
    FakeGroup group;
    group.other = {100.0, 200.0, 0.5};
    WorldCommunicator comm(std::make_unique<LocalCommunicator>(towers), group);
    CHECK(comm.size() == towers);
    std::vector<std::vector<float>> f(static_cast<size_t>(towers));
    std::vector<std::vector<double>> d(static_cast<size_t>(towers));
    on_towers(towers, [&](int r) {
      f[size_t(r)] = {float(r + 1), 2.f * float(r + 1), 0.25f};
      d[size_t(r)] = {double(r + 1), 2.0 * (r + 1), 0.25};
      comm.all_reduce_sum(r, f[size_t(r)].data(), 3);
      comm.all_reduce_sum(r, d[size_t(r)].data(), 3);
    });
    const double local1 = towers * (towers + 1) / 2.0;  // 1 + 2 + ... + towers
    for (int r = 0; r < towers; ++r) {
      CHECK(f[size_t(r)] == std::vector<float>{float(local1 + 100), float(2 * local1 + 200), float(0.25 * towers + 0.5)});
      CHECK(d[size_t(r)] == std::vector<double>{local1 + 100, 2 * local1 + 200, 0.25 * towers + 0.5});
    }
    CHECK(group.calls == 2);  // tower 0 alone joins the processes' collectives, once per collective
  }
}

TEST_CASE("the world communicator broadcasts world tower 0's values to every tower and refuses other roots", "[mpi]") {
  FakeGroup group;
  WorldCommunicator comm(std::make_unique<LocalCommunicator>(2), group);
  std::vector<std::vector<float>> v = {{1.f, 2.f}, {7.f, 9.f}};
  on_towers(2, [&](int r) { comm.broadcast(r, v[size_t(r)].data(), 2, 0); });
  CHECK(v[1] == std::vector<float>{1.f, 2.f});
  CHECK(group.calls == 1);
  float x = 0;
  CHECK_THROWS_AS(WorldCommunicator(std::make_unique<LocalCommunicator>(1), group).broadcast(0, &x, 1, 1),
                  InternalError);
}

TEST_CASE("check_together returns when the check passed on every process, and otherwise every process throws "
          "once rank 0 has printed", "[mpi]") {
  FakeGroup group;
  group.other = {0.0};
  const auto fails = [] { throw UserError("bad file"); };
  const auto passes = [] {};
  SECTION("passed everywhere: one all_gather, no error") {
    group.gathered = "there\n";
    check_together(&group, passes);
    CHECK(group.calls == 1);
  }
  SECTION("failed here alone, or alike everywhere, or elsewhere alone: printed by rank 0, then reported") {
    for (const auto& [other, here_fails, printed] :
         {std::tuple{"there\n", true, "rank 0 (host here): error: bad file\n"},
          std::tuple{"there\n!bad file", true, "error: bad file\n"},
          std::tuple{"there\n!no mask", false, "rank 1 (host there): error: no mask\n"}}) {
      group.calls = 0;
      group.gathered = other;
      const bool fail_here = here_fails;  // C++17 lambdas cannot capture a structured binding
      const std::string err = stderr_of([&] {
        CHECK_THROWS_AS(fail_here ? check_together(&group, fails) : check_together(&group, passes),
                        ReportedUserError);
      });
      CHECK(err == printed);
      CHECK(group.calls == 2);  // the all_gather, then the wait
    }
  }
  SECTION("other exceptions pass through before any collective") {
    CHECK_THROWS_AS(check_together(&group, [] { throw std::runtime_error("internal"); }), std::runtime_error);
    CHECK(group.calls == 0);
  }
  SECTION("one process, or none: the check alone, its UserError unprinted") {
    CHECK_THROWS_AS(check_together(nullptr, fails), UserError);
    try {
      check_together(nullptr, fails);
    } catch (const ReportedUserError&) {
      FAIL("a process alone reports nothing for main");
    } catch (const UserError& e) {
      CHECK(std::string(e.what()) == "bad file");
    }
    CHECK_THROWS_AS(throw_alike(nullptr, "nan"), UserError);
  }
}

TEST_CASE("the processes' device plans are checked together: towers sharing a GPU, or CPU and GPU towers mixed, "
          "are refused on every process before any device is used", "[mpi]") {
  FakeGroup group;
  group.other = {0.0};
  DevicePlan shared;
  shared.gpus = {0, 0};  // refused from the plans alone: no GPU is touched
  group.gathered = "there\n1c";
  CHECK_THAT(stderr_of([&] { CHECK_THROWS_AS(TowerDevices(shared, Precision::FP32, 1.0, &group), ReportedUserError); }),
             Catch::StartsWith("error: process 0's towers share a GPU"));
  DevicePlan cpu;
  cpu.cpu_towers = 1;
  for (const std::string other : {"2s GPU-a GPU-a", "1g GPU-a"}) {
    group.gathered = "there\n" + other;
    const std::string err = stderr_of([&] {
      CHECK_THROWS_AS(TowerDevices(cpu, Precision::FP32, 1.0, &group), ReportedUserError);
    });
    CHECK_THAT(err, Catch::StartsWith("error: process 1") &&
                        Catch::Contains(other[1] == 's' ? "towers share a GPU" : "plans GPU towers and process 0 CPU"));
  }
  // Two processes that each see one GPU only, the same one (no launcher binding), both took it
  // with --gpus local; NCCL then failed with "invalid usage". The GPUs' UUIDs name the physical GPU.
  DevicePlan one;
  one.gpus = {0};
  one.gpu_ids = {"GPU-5f0c"};
  group.gathered = "there\n1g GPU-5f0c";
  CHECK_THAT(stderr_of([&] { CHECK_THROWS_AS(TowerDevices(one, Precision::FP32, 1.0, &group), ReportedUserError); }),
             Catch::StartsWith("error: rank 0 (host here) and rank 1 (host there) would both train on GPU GPU-5f0c") &&
                 Catch::Contains("srun --gpus-per-task=1"));
}

TEST_CASE("rank 0's own work runs while every process takes part in an all-reduce a second, and its error is "
          "raised on every process", "[mpi]") {
  // From a multi-process trial: rank 0 wrote a checkpoint for longer than collective_timeout while the others
  // waited in one collective, which ended a healthy run as if rank 0 hung.
  FakeGroup group;
  group.other = {0.0};       // the other process: nothing to say but "not done"
  group.gathered = "there\n";  // and no error of its own
  int ran = 0;
  const auto start = std::chrono::steady_clock::now();
  run_on_root(&group, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2300));
    ++ran;
  });
  CHECK(ran == 1);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(2300));
  CHECK(group.calls >= 3 + 1);  // at least three heartbeats (one a second) and check_together's gather
  CHECK(group.calls <= 5 + 1);
  group.calls = 0;
  const std::string err = stderr_of([&] {
    CHECK_THROWS_AS(run_on_root(&group, [] { throw UserError("cannot write checkpoint 'last.h5': disk full"); }),
                    ReportedUserError);
  });
  CHECK(err == "rank 0 (host here): error: cannot write checkpoint 'last.h5': disk full\n");
  // Alone: the work itself, its error as it is.
  CHECK_THROWS_WITH(run_on_root(nullptr, [] { throw UserError("disk full"); }), "disk full");
}
