// The device plumbing that a CPU-only machine can check: LocalCommunicator
// stages a GPU rank's data through host memory (against a stand-in device
// context whose memory holds the complement of each byte, so reading device
// memory as host memory gives wrong sums), and a build without the CUDA
// backend rejects a CUDA device with an InternalError instead of running.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "stub_device_context.h"
#include "backend/elementwise_ops.h"
#include "backend/ops.h"
#include "backend/train_ops.h"
#include "core/buffer.h"
#include "core/error.h"
#include "dist/local_communicator.h"

using namespace trainer;

namespace {

/// A stand-in GPU context on host memory: its allocations hold the bitwise
/// complement of the values copied in, and copies between them and the host
/// complement every byte.
class ComplementContext final : public StubDeviceContext {
 public:
  ~ComplementContext() override {
    for (auto& [p, bytes] : blocks_) delete[] static_cast<unsigned char*>(p);
  }
  void* allocate(size_t bytes) override {
    void* p = new unsigned char[bytes];
    blocks_[p] = bytes;
    return p;
  }
  void deallocate(void* p, size_t) noexcept override {
    blocks_.erase(p);
    delete[] static_cast<unsigned char*>(p);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    std::memmove(dst, src, bytes);
    if (owns(dst) != owns(src))
      for (size_t i = 0; i < bytes; ++i) static_cast<unsigned char*>(dst)[i] ^= 0xff;
    ++copies;
  }
  void zero(void* p, size_t bytes) override { std::memset(p, 0xff, bytes); }
  int copies = 0;

 private:
  bool owns(const void* p) const {
    const auto* c = static_cast<const unsigned char*>(p);
    for (auto& [q, bytes] : blocks_) {
      const auto* b = static_cast<const unsigned char*>(q);
      if (c >= b && c < b + bytes) return true;
    }
    return false;
  }
  std::map<void*, size_t> blocks_;
};

}  // namespace

TEST_CASE("LocalCommunicator stages GPU ranks through host memory", "[towers]") {
  ComplementContext ctx0, ctx2;
  const std::vector<Device> devices{Device{DeviceKind::CUDA, 0, &ctx0}, Device{}, Device{DeviceKind::CUDA, 1, &ctx2}};
  LocalCommunicator comm(3, devices);
  std::vector<Buffer<float>> f, bc;
  std::vector<Buffer<double>> d;
  for (int r = 0; r < 3; ++r) {
    f.emplace_back(devices[size_t(r)]);
    f.back().copy_from_host({float(r + 1), 10.f * float(r + 1)});
    d.emplace_back(devices[size_t(r)]);
    d.back().copy_from_host({0.5 * (r + 1)});
    bc.emplace_back(devices[size_t(r)]);
    bc.back().copy_from_host({float(r), -float(r)});
  }
  for (int root : {0, 1}) {
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r)
      threads.emplace_back([&, r] {
        if (root == 0) comm.all_reduce_sum(r, f[size_t(r)].data(), 2);
        if (root == 0) comm.all_reduce_sum(r, d[size_t(r)].data(), 1);
        comm.broadcast(r, bc[size_t(r)].data(), 2, root);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < 3; ++r) CHECK(bc[size_t(r)].to_host() == std::vector<float>{float(root), -float(root)});
    for (int r = 0; r < 3; ++r) bc[size_t(r)].copy_from_host({float(r), -float(r)});
  }
  for (int r = 0; r < 3; ++r) {
    CHECK(f[size_t(r)].to_host() == std::vector<float>{6.f, 60.f});
    CHECK(d[size_t(r)].to_host() == std::vector<double>{3.0});
  }
  CHECK(ctx0.copies > 0);
  CHECK(ctx2.copies > 0);
  CHECK_THROWS_AS(LocalCommunicator(2, std::vector<Device>{Device{}}), InternalError);
}

#if !defined(TRAINER_WITH_CUDA)
TEST_CASE("a build without the CUDA backend rejects a CUDA device", "[towers]") {
  ComplementContext ctx;
  const Device gpu{DeviceKind::CUDA, 0, &ctx};
  float v[4] = {1.f, 2.f, 3.f, 4.f};
  CHECK_THROWS_AS(activation_forward(gpu, Activation{ActivationKind::Relu}, v, 4), InternalError);
  OptimizerArrays step;
  step.w = v, step.g = v, step.n = 4;
  CHECK_THROWS_AS(sgd_step(gpu, step, SgdParams{0.1f, 0.f, false}), InternalError);
  Conv2DOp conv(Conv2DParams{});
  const Shape s{1, 2, 2, 1};
  const TensorView view{v, DType::F32, s};
  CHECK_THROWS_AS(conv.forward(gpu, view, ConvWeights{v, nullptr}, Activation{}, view), InternalError);
  CHECK_THROWS_AS(accumulate(gpu, DType::F32, v, v, 4), InternalError);
  BatchNormOp bn;
  double sums[2];
  CHECK_THROWS_AS(bn.on(gpu).stat_sums(v, s, sums), InternalError);
  activation_forward(Device{}, Activation{ActivationKind::Relu}, v, 4);  // the CPU still works
  CHECK(v[3] == 4.f);
}
#endif
