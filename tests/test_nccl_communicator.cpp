// NCCL communicator: which device sets it refuses (any build), and on the
// visible GPUs (skipped without one) that its collectives are ordered with the
// compute stream, give the sums and broadcasts, and that a collective a peer
// never joins times out with a message instead of hanging.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "gpu_testing.h"
#include "stub_device_context.h"
#include "backend/gpu_info.h"
#include "core/error.h"
#include "dist/nccl_communicator.h"

using namespace trainer;
using namespace trainer::testing;
using Catch::Contains;

namespace {

/// A context the refusal checks never reach: make_nccl_communicator validates before any device call.
using UnusedContext = StubDeviceContext;

/// One context per visible GPU (distinct GPUs, as NCCL needs); empty without a GPU.
struct GpuTowers {
  std::vector<std::unique_ptr<DeviceContext>> contexts;
  std::vector<Device> devices;
  GpuTowers() {
    for (const GpuInfo& g : list_gpus()) {
      contexts.push_back(make_gpu_context(g.index, Precision::FP32));
      devices.push_back(Device{DeviceKind::CUDA, g.index, contexts.back().get()});
    }
  }
};

}  // namespace

TEST_CASE("NCCL communicator refuses CPU towers and towers sharing a GPU", "[devices]") {
  UnusedContext a, b;
  const std::vector<Device> shared = {{DeviceKind::CUDA, 0, &a}, {DeviceKind::CUDA, 0, &b}};
#ifdef TRAINER_WITH_CUDA
  CHECK_THROWS_WITH(make_nccl_communicator(shared, 60), Contains("share cuda:0") && Contains("in-process"));
  CHECK_THROWS_WITH(make_nccl_communicator({Device{}}, 60), Contains("tower 0 is on cpu"));
  CHECK_THROWS_AS(make_nccl_communicator({}, 60), InternalError);
#else
  CHECK_THROWS_WITH(make_nccl_communicator(shared, 60), Contains("no CUDA backend"));
#endif
}

TEST_CASE("NCCL collectives on every visible GPU: sums, broadcast, tickets", "[gpu][nccl]") {
  GpuTowers t;
  if (t.devices.empty()) {
    WARN("no GPU visible: NCCL collectives not tested");
    return;
  }
  const int ranks = int(t.devices.size());
  auto comm = make_nccl_communicator(t.devices, 60);
  REQUIRE(comm->size() == ranks);
  const size_t n = 100003;  // odd, over several NCCL chunks
  // What each rank reads back (Catch2 assertions stay on this thread).
  struct Result {
    std::vector<float> sum, bcast, restarted;
    std::vector<double> dsum;
    std::vector<std::vector<float>> buckets;
    std::vector<int> tickets;
  };
  std::vector<Result> res(static_cast<size_t>(ranks));
  run_ranks(ranks, [&](int r) {
    DeviceContext& ctx = *t.contexts[size_t(r)];
    Result& out = res[size_t(r)];
    std::vector<float> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = float((r + 1) * int(i % 13));
    DeviceBuffer<float> sum(ctx, h);
    comm->all_reduce_sum(r, sum.p, n);
    const std::vector<double> hd = {0.5 * (r + 1), 1e12};
    DeviceBuffer<double> dsum(ctx, hd);
    comm->all_reduce_sum(r, dsum.p, hd.size());
    for (size_t i = 0; i < n; ++i) h[i] = float(r * 1000 + int(i % 997));
    DeviceBuffer<float> bcast(ctx, h);
    comm->broadcast(r, bcast.p, n, ranks - 1);
    // Three started reductions of different sizes, waited for one by one and then all.
    std::vector<std::unique_ptr<DeviceBuffer<float>>> buckets;
    for (int k = 0; k < 3; ++k) {
      const std::vector<float> values(size_t(k + 1) * 1000, float(r + k));
      buckets.push_back(std::make_unique<DeviceBuffer<float>>(ctx, values));
    }
    for (auto& b : buckets) out.tickets.push_back(comm->start_all_reduce_sum(r, b->p, b->n));
    comm->wait(r, 1);
    comm->wait_all(r);
    DeviceBuffer<float> restarted(ctx, std::vector<float>(10, 1.f));
    out.tickets.push_back(comm->start_all_reduce_sum(r, restarted.p, restarted.n));  // tickets restart after wait_all
    comm->wait_all(r);
    comm->synchronize(r);
    out.sum = sum.read();
    out.dsum = dsum.read();
    out.bcast = bcast.read();
    for (auto& b : buckets) out.buckets.push_back(b->read());
    out.restarted = restarted.read();
  });
  const float tri = float(ranks * (ranks + 1) / 2);
  for (const Result& out : res) {
    CHECK(out.tickets == std::vector<int>{0, 1, 2, 0});
    for (size_t i = 0; i < n; i += 997) REQUIRE(out.sum[i] == tri * float(i % 13));
    CHECK(out.dsum[0] == 0.5 * tri);
    CHECK(out.dsum[1] == 1e12 * ranks);
    for (size_t i = 0; i < n; i += 991) REQUIRE(out.bcast[i] == float((ranks - 1) * 1000 + int(i % 997)));
    for (int k = 0; k < 3; ++k) {
      const std::vector<float>& v = out.buckets[size_t(k)];
      CHECK(v.size() == size_t(k + 1) * 1000);
      CHECK(v.front() == float(ranks * k) + tri - float(ranks));  // sum over r of (r + k)
      CHECK(v.back() == v.front());
    }
    CHECK(out.restarted.back() == float(ranks));
  }
}

TEST_CASE("NCCL collective a peer never joins times out and aborts every rank", "[gpu][nccl]") {
  GpuTowers t;
  if (t.devices.size() < 2) {
    WARN("fewer than two GPUs: NCCL timeout not tested");
    return;
  }
  const int ranks = int(t.devices.size());
  auto comm = make_nccl_communicator(t.devices, 1.0);
  std::mutex mu;
  std::condition_variable cv;
  bool rank0_done = false;
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  run_ranks(ranks, [&](int r) {
    DeviceContext& ctx = *t.contexts[size_t(r)];
    DeviceBuffer<float> buf(ctx, std::vector<float>(4096, 1.f));
    comm->all_reduce_sum(r, buf.p, buf.n);  // every rank: connections are set up
    comm->synchronize(r);
    try {
      if (r == 0) {
        comm->all_reduce_sum(r, buf.p, buf.n);  // the others never join this one
        comm->synchronize(r);
      } else {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return rank0_done; });
        comm->all_reduce_sum(r, buf.p, buf.n);
      }
    } catch (const InternalError& e) {
      errors[size_t(r)] = e.what();
    }
    if (r == 0) {
      std::lock_guard<std::mutex> lock(mu);
      rank0_done = true;
      cv.notify_all();
    }
  });
  CHECK_THAT(errors[0], Contains("all_reduce_sum of 4096 floats on rank 0 (cuda:") && Contains("timed out after 1 s"));
  for (int r = 1; r < ranks; ++r) CHECK_THAT(errors[size_t(r)], Contains("aborted") && Contains("timed out after 1 s"));
}
