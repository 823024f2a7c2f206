// GPU parity of the per (sample, channel) ops of squeeze-and-excitation
// blocks: GlobalAveragePooling2D, GlobalMaxPooling2D (ties included) and
// Multiply's [1, 1, C] scales, forward and backward, against the CPU (the
// oracle). The sums are taken in double on both devices in different orders,
// so they agree to rounding; everything else is the same bits. Skips without
// a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <tuple>
#include <vector>

#include "backend/elementwise_ops.h"
#include "gpu_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// Relative tolerance of a double sum rounded to float, in another order.
constexpr double kSum = 1e-6;

/// The shapes: one channel, a partial channel tile, more than one tile; a
/// sample split into many pixel ranges; a batch of one; more samples than a
/// grid's z dimension holds (65535).
const Shape kShapes[] = {{3, 9, 7, 1},     {2, 5, 3, 5},     {2, 6, 11, 40},
                         {2, 64, 80, 33},  {1, 128, 128, 8}, {70000, 1, 2, 2}};

/// n values in [-1, 1) rounded to multiples of 1/4, so that many pixels tie for a maximum.
std::vector<float> coarse_values(size_t n, unsigned seed) {
  std::vector<float> v = random_values(n, seed);
  for (float& x : v) x = std::round(x * 4.f) / 4.f;
  return v;
}

}  // namespace

TEST_CASE("GPU GlobalAveragePooling2D and GlobalMaxPooling2D match the CPU (ties share the gradient)",
          "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  for (const Shape& s : kShapes) {
    for (const bool ties : {false, true}) {
      INFO("x " << s.nhwc() << (ties ? ", coarse values (ties)" : ""));
      const size_t rows = size_t(s.n) * size_t(s.c);
      const std::vector<float> xh = ties ? coarse_values(s.numel(), 801) : random_values(s.numel(), 801),
                               dyh = random_values(rows, 802);
      auto run = [&](const Device& d) {
        Buffer<float> x = upload(xh, d), dy = upload(dyh, d), avg(d, rows), max(d, rows), davg(d, s.numel()),
                      dmax(d, s.numel());
        global_avg_pool_forward(d, x.data(), s, avg.data());
        global_avg_pool_backward(d, dy.data(), s, davg.data());
        global_max_pool_forward(d, x.data(), s, max.data());
        global_max_pool_backward(d, x.data(), s, max.data(), dy.data(), dmax.data());
        return std::make_tuple(download(avg), download(davg), download(max), download(dmax));
      };
      const auto ref = run(Device{}), got = run(g.device);
      CHECK_CLOSE("mean", std::get<0>(got), std::get<0>(ref), kSum);
      CHECK_IDENTICAL("mean's gradient", std::get<1>(got), std::get<1>(ref));
      CHECK_IDENTICAL("max", std::get<2>(got), std::get<2>(ref));
      CHECK_IDENTICAL("max's gradient", std::get<3>(got), std::get<3>(ref));
    }
  }
}

TEST_CASE("GPU Multiply by [1, 1, C] scales matches the CPU, forward and both gradients", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  for (const Shape& s : kShapes) {
    INFO("x " << s.nhwc());
    const size_t rows = size_t(s.n) * size_t(s.c);
    const std::vector<float> xh = random_values(s.numel(), 811), sh = random_values(rows, 812),
                             dyh = random_values(s.numel(), 813);
    auto run = [&](const Device& d) {
      Buffer<float> x = upload(xh, d), sc = upload(sh, d), dy = upload(dyh, d), y(d, s.numel()), dx(d, s.numel()),
                    ds(d, rows);
      scale_channels_forward(d, x.data(), sc.data(), s, y.data());
      scale_channels_backward(d, x.data(), sc.data(), s, dy.data(), dx.data(), ds.data());
      return std::make_tuple(download(y), download(dx), download(ds));
    };
    const auto ref = run(Device{}), got = run(g.device);
    CHECK_IDENTICAL("y", std::get<0>(got), std::get<0>(ref));
    CHECK_IDENTICAL("dx", std::get<1>(got), std::get<1>(ref));
    CHECK_CLOSE("ds", std::get<2>(got), std::get<2>(ref), kSum);
    // Either gradient alone gives what the call computing both gives.
    Buffer<float> x = upload(xh, g.device), sc = upload(sh, g.device), dy = upload(dyh, g.device),
                  dx(g.device, s.numel()), ds(g.device, rows);
    scale_channels_backward(g.device, x.data(), sc.data(), s, dy.data(), dx.data(), nullptr);
    scale_channels_backward(g.device, x.data(), sc.data(), s, dy.data(), nullptr, ds.data());
    CHECK_IDENTICAL("dx alone", download(dx), std::get<1>(got));
    CHECK_IDENTICAL("ds alone", download(ds), std::get<2>(got));
  }
}

TEST_CASE("GPU Add of [1, 1, C] values and their gradient match the CPU", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  for (const Shape& s : kShapes) {
    INFO("x " << s.nhwc());
    const size_t rows = size_t(s.n) * size_t(s.c);
    const std::vector<float> xh = random_values(s.numel(), 831), sh = random_values(rows, 832);
    auto run = [&](const Device& d) {
      Buffer<float> x = upload(xh, d), sc = upload(sh, d), y(d, s.numel()), sums(d, rows);
      add_channels_forward(d, x.data(), sc.data(), s, y.data());
      channel_sums(d, x.data(), s, sums.data());
      return std::make_pair(download(y), download(sums));
    };
    const auto ref = run(Device{}), got = run(g.device);
    CHECK_IDENTICAL("y", got.first, ref.first);
    CHECK_CLOSE("sums", got.second, ref.second, kSum);
  }
}

TEST_CASE("GPU GlobalMaxPooling2D gives NaN for a channel holding a NaN, as the CPU", "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const Shape s{2, 3, 5, 4};
  std::vector<float> xh = random_values(s.numel(), 821);
  xh[7] = std::nanf("");  // sample 0, channel 3
  auto run = [&](const Device& d) {
    Buffer<float> x = upload(xh, d), y(d, 8);
    global_max_pool_forward(d, x.data(), s, y.data());
    return download(y);
  };
  const std::vector<float> ref = run(Device{}), got = run(g.device);
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("row " << i);
    CHECK(std::isnan(ref[i]) == (i == 3));
    if (i == 3) CHECK(std::isnan(got[i]));
    else CHECK(got[i] == ref[i]);
  }
}
