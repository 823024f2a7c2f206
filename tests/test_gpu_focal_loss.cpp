// GPU parity of the focal, label-smoothed and class-weighted losses, the CPU
// as the oracle: the binary focal sum and gradient, the categorical focal
// (and smoothed) softmax sum and gradient with some pixels ignored, each with
// and without class weights (in device memory), and a binary focal
// network training on GPU 0 and on two towers sharing it. Skipped without a
// GPU.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "backend/train_ops.h"
#include "config/config.h"
#include "dist/device_plan.h"
#include "backend/gpu_info.h"
#include "gpu_testing.h"
#include "tiny_model.h"
#include "train/trainer.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

/// Relative tolerance of per-value exp/log/pow results (CUDA's and glibc's
/// differ by a few ulp; powf's two roundings add to expf's and logf's).
constexpr double kTranscendental = 5e-5;

const std::vector<CrossEntropyForm> kForms = {
    {2.f, 0.25f, false, 0.f}, {2.f, 0.25f, true, 0.f}, {0.5f, 1.f, false, 0.1f}, {0.f, 1.f, false, 0.2f}};

}  // namespace

TEST_CASE("GPU focal and smoothed losses and gradients match the CPU", "[gpu][gpu_ops][focal]") {
  TRAINER_REQUIRE_GPU();
  GpuDevice g(0, Precision::FP32);
  const size_t n = 3 * 97 * 101 + 2;  // not a multiple of 4 (the float4 path's tail), a block or a range
  const std::vector<float> z = random_values(n, 601, -12.f, 12.f);
  std::vector<float> y(n);
  std::mt19937 rng(602);
  for (float& v : y) v = float(rng() % 2u);
  const int k = 5;
  const std::vector<float> zc = random_values(n * size_t(k), 603, -8.f, 8.f);
  std::vector<float> yc(n);
  for (float& v : yc) v = float(rng() % unsigned(k));
  for (size_t p = 3; p < n; p += 7) yc[p] = kIgnoredPixel;
  const std::vector<float> class_weights = {0.5f, 3.f, 1.f, 0.f, 2.f};  // binary: the first two
  const std::vector<float> alphas = {0.25f, 1.f, 2.f, 0.f, 0.5f};       // categorical, with `weighted`
  for (const bool weighted : {false, true})
    for (const CrossEntropyForm& f : kForms) {
      INFO("gamma " << f.gamma << ", alpha " << f.alpha << ", balanced " << f.balanced << ", smoothing "
                    << f.smoothing << (weighted ? ", class weights (and per-class alphas)" : ""));
      // The form on device d, with its copies of the class weights (w) and alphas (a) there.
      Buffer<float> a_cpu, a_gpu;
      auto form_on = [&](const Device& d, Buffer<float>& w, bool categorical) {
        CrossEntropyForm on = f;
        if (categorical) on.balanced = false;  // binary only
        if (weighted) {
          w = upload(class_weights, d);
          on.class_weights = w.data();
          if (categorical) {
            Buffer<float>& a = d.is_cuda() ? a_gpu : a_cpu;
            a = upload(alphas, d);
            on.alphas = a.data();
          }
        }
        return on;
      };
      auto sum = [&](const Device& d) {
        Buffer<float> zb = upload(z, d), yb = upload(y, d), w;
        std::vector<double> s(1);
        sigmoid_focal_sum(d, zb.data(), yb.data(), n, form_on(d, w, false), s.data());
        return s;
      };
      CHECK_CLOSE("sigmoid_focal_sum", sum(g.device), sum(Device{}), kTranscendental);
      auto grad = [&](const Device& d) {
        Buffer<float> zb = upload(z, d), yb = upload(y, d), gb(d, n), w;
        sigmoid_focal_grad(d, zb.data(), yb.data(), n, form_on(d, w, false), 1.f / 97, gb.data());
        return download(gb);
      };
      CHECK_CLOSE("sigmoid_focal_grad", grad(g.device), grad(Device{}), kTranscendental);
      auto csum = [&](const Device& d) {
        Buffer<float> zb = upload(zc, d), yb = upload(yc, d), w;
        std::vector<double> s(1);
        softmax_loss_sum(d, zb.data(), yb.data(), n, k, form_on(d, w, true), s.data());
        return s;
      };
      CHECK_CLOSE("softmax_loss_sum (focal)", csum(g.device), csum(Device{}), kTranscendental);
      auto cgrad = [&](const Device& d) {
        Buffer<float> zb = upload(zc, d), yb = upload(yc, d), gb(d, zc.size()), w;
        softmax_loss_grad(d, zb.data(), yb.data(), n, k, form_on(d, w, true), 1.f / 97, gb.data());
        return download(gb);
      };
      CHECK_CLOSE("softmax_loss_grad (focal)", cgrad(g.device), cgrad(Device{}), kTranscendental);
    }
}

TEST_CASE("a binary focal network with class weights trains on GPU 0 and on two towers of GPU 0 as on the CPU (fp32)",
          "[gpu][gpu_training][focal]") {
  TRAINER_REQUIRE_GPU();
  std::string yaml = tiny_config(true);
  const std::string loss = "loss: bce_dice";
  REQUIRE(yaml.find(loss) != std::string::npos);
  yaml.replace(yaml.find(loss), loss.size(),
               "loss: {type: BinaryFocalCrossentropy, apply_class_balancing: true, label_smoothing: 0.1}\n"
               "  class_weight: {0: 0.5, 1: 2}");
  Config config = parse_config(yaml, "focal.yaml");
  config.training.precision = Precision::FP32;
  const Dataset data = tiny_data();
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}};
  auto run = [&](const std::string& spec) {
    Trainer t(config, plan_devices(spec, list_gpus(), true), 1);
    std::vector<double> losses;
    for (const std::vector<int>& b : batches) losses.push_back(t.train_step(data, b).loss());
    return std::make_pair(losses, t.params(0));
  };
  const auto cpu = run("cpu");
  for (const char* spec : {"0", "0,0"}) {
    INFO("--gpus " << spec);
    const auto gpu = run(spec);
    for (size_t i = 0; i < batches.size(); ++i) CHECK(gpu.first[i] == Approx(cpu.first[i]).epsilon(1e-3));
    double worst = 0;
    for (size_t i = 0; i < cpu.second.size(); ++i)
      worst = std::max(worst, std::abs(double(gpu.second[i]) - cpu.second[i]) /
                                  std::max(1.0, std::abs(double(cpu.second[i]))));
    CHECK(worst <= 1e-3);
  }
}
