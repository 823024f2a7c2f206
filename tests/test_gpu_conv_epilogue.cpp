// The convolution's activation gradient on a GPU (backend/cuda/conv_epilogue.h:
// g = dy * act'(y) with the bias gradient, the sum of g over the rows) against
// the same per-element functions on the host: g exactly (both compute each
// element through elementwise_math.h's activation_dx, rounded alike), the bias
// gradient to the order of its double sums. Channel counts take both kernels:
// whole 16-byte groups of channels per thread (C a multiple of 8 in bf16, of 4
// in fp32; group counts that are powers of two and ones that are not, so a
// block's last tile is partial) and one channel per thread (other C, or a
// tensor not aligned for the groups). The conv tests (test_gpu_ops.cpp) take it
// inside the layers. Without a GPU every case skips with a warning.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/elementwise_math.h"
#include "core/dtype.h"
#include "gpu_testing.h"
#if defined(TRAINER_WITH_CUDA)
#include "backend/cuda/conv_epilogue.h"
#include "backend/cuda/cudnn_conv.h"
#endif

using namespace trainer;
using namespace trainer::testing;

#if defined(TRAINER_WITH_CUDA)
namespace {

struct GradientCase {
  long long rows;
  int C;
  DType y_type, g_type;
  size_t offset;  ///< Elements into the buffers where y, dy and g start (1: not 16-byte aligned).
};

/// The host's g and bias gradient of rows x C values of y and dy (as the device holds them).
void host_gradient(Activation act, const std::vector<float>& y, const std::vector<float>& dy, int C, DType g_type,
                   std::vector<float>& g, std::vector<double>& dbias) {
  g.resize(dy.size());
  dbias.assign(size_t(C), 0.0);
  for (size_t i = 0; i < dy.size(); ++i) {
    const float v = act.linear() ? dy[i] : activation_dx(act, y[i], dy[i]);
    g[i] = g_type == DType::BF16 ? round_bf16(v) : v;
    dbias[i % size_t(C)] += v;
  }
}

}  // namespace
#endif

TEST_CASE("GPU activation gradient: g exactly and the bias gradient as the host's, 16-byte groups and single channels",
          "[gpu][gpu_ops]") {
  TRAINER_REQUIRE_GPU();
#if defined(TRAINER_WITH_CUDA)
  GpuDevice gpu(0, Precision::BF16);
  cuda::CudaContext& ctx = cuda::context(gpu.device);
  const GradientCase cases[] = {
      {4096, 64, DType::BF16, DType::BF16, 0},   // 8 groups of 8: one tile
      {3000, 24, DType::BF16, DType::BF16, 0},   // 3 groups: tiles of 2, the last partial
      {777, 1024, DType::BF16, DType::BF16, 0},  // 128 groups: 4 tiles of 32
      {700, 8, DType::BF16, DType::BF16, 0},     // 1 group: 256 lanes of rows
      {5, 8, DType::BF16, DType::BF16, 0},       // fewer rows than lanes
      {500, 40, DType::BF16, DType::F32, 0},     // bf16 in, fp32 g (32-byte packs)
      {900, 12, DType::F32, DType::F32, 0},      // fp32: groups of 4
      {900, 20, DType::F32, DType::BF16, 0},     // fp32 in, bf16 g (8-byte packs)
      {600, 5, DType::BF16, DType::BF16, 0},     // C not a multiple of 8: one channel a thread
      {600, 16, DType::BF16, DType::BF16, 1},    // not aligned: one channel a thread
  };
  constexpr size_t kPad = 16;   // elements after g, which must keep the sentinel
  constexpr float kSentinel = 7.f;
  unsigned seed = 900;
  for (const GradientCase& c : cases)
    for (Activation act : {Activation{ActivationKind::Relu}, Activation{}}) {
      INFO("rows " << c.rows << ", C " << c.C << ", y " << dtype_name(c.y_type) << ", g " << dtype_name(c.g_type)
                   << ", offset " << c.offset << (act.linear() ? ", linear" : ", relu"));
      const size_t n = size_t(c.rows) * size_t(c.C), total = c.offset + n + kPad;
      std::vector<float> y = random_values(total, ++seed), dy = random_values(total, ++seed);
      if (c.y_type == DType::BF16) y = round_bf16(y), dy = round_bf16(dy);
      const Shape s{1, 1, int(total), 1};
      const Tensor yd = make_tensor(s, y, gpu.device, c.y_type), dyd = make_tensor(s, dy, gpu.device, c.y_type);
      Tensor gd = make_tensor(s, std::vector<float>(total, kSentinel), gpu.device, c.g_type);
      Buffer<float> dbias(gpu.device, size_t(c.C));
      const size_t ysz = dtype_size(c.y_type), gsz = dtype_size(c.g_type);
      const auto* y0 = static_cast<const char*>(yd.raw()) + c.offset * ysz;
      const auto* dy0 = static_cast<const char*>(dyd.raw()) + c.offset * ysz;
      cuda::activation_gradient(ctx, act, y0, dy0, cuda::cudnn_type(c.y_type), c.rows, c.C,
                                static_cast<char*>(gd.raw()) + c.offset * gsz, cuda::cudnn_type(c.g_type),
                                dbias.data());
      std::vector<float> g;
      std::vector<double> want;
      host_gradient(act, std::vector<float>(y.begin() + long(c.offset), y.begin() + long(c.offset + n)),
                    std::vector<float>(dy.begin() + long(c.offset), dy.begin() + long(c.offset + n)), c.C,
                    c.g_type, g, want);
      std::vector<float> expected(total, kSentinel);
      std::copy(g.begin(), g.end(), expected.begin() + long(c.offset));
      CHECK_IDENTICAL("g, with the sentinel around it", download(gd), expected);
      const std::vector<float> db = dbias.to_host();
      for (int k = 0; k < c.C; ++k) CHECK(db[size_t(k)] == Approx(want[size_t(k)]).epsilon(1e-6).margin(1e-6));
      // The bias gradient alone (g not stored), and g alone (no sums), give the same.
      Buffer<float> only(gpu.device, size_t(c.C));
      cuda::bias_gradient(ctx, dy0, cuda::cudnn_type(c.y_type), c.rows, c.C, only.data());
      if (act.linear()) CHECK(only.to_host() == db);
      Tensor g2 = make_tensor(s, std::vector<float>(total, kSentinel), gpu.device, c.g_type);
      cuda::activation_gradient(ctx, act, y0, dy0, cuda::cudnn_type(c.y_type), c.rows, c.C,
                                static_cast<char*>(g2.raw()) + c.offset * gsz, cuda::cudnn_type(c.g_type), nullptr);
      CHECK_IDENTICAL("g without the bias gradient", download(g2), expected);
    }
#endif
}
