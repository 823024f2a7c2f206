#include "gpu_testing.h"

#include <cmath>
#include <cstring>
#include <exception>
#include <random>
#include <sstream>
#include <thread>

#include "backend/gpu_info.h"
#include "core/error.h"

namespace trainer::testing {

bool gpu_available() {
  static const bool available = !list_gpus().empty();
  return available;
}

std::string gpu_skip_message() {
#if defined(TRAINER_WITH_CUDA)
  return "skipped: no CUDA GPU visible (built with CUDA: yes)";
#else
  return "skipped: no CUDA GPU visible (built with CUDA: no)";
#endif
}

GpuDevice::GpuDevice(int index, Precision precision) {
#if defined(TRAINER_WITH_CUDA)
  ctx = make_gpu_context(index, precision);
  device = Device{DeviceKind::CUDA, index, ctx.get()};
#else
  (void)precision;
  throw InternalError("GpuDevice(" + std::to_string(index) + "): this build has no CUDA backend");
#endif
}

std::vector<float> random_values(size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

Tensor make_tensor(Shape s, const std::vector<float>& host, const Device& d) {
  REQUIRE(host.size() == s.numel());
  Tensor t(s, d);
  t.buffer().copy_from_host(host);
  return t;
}

std::vector<float> round_bf16(std::vector<float> v) {
  for (float& x : v) x = round_bf16(x);
  return v;
}

Tensor make_bf16_tensor(Shape s, const std::vector<float>& host, const Device& d) {
  REQUIRE(host.size() == s.numel());
  Tensor t(s, d);
  t.set_dtype(DType::BF16);
  std::vector<uint16_t> halves((host.size() + 1) / 2 * 2, 0);  // bf16 0 pads the last word
  for (size_t i = 0; i < host.size(); ++i) halves[i] = float_to_bf16(host[i]);
  std::vector<float> words(halves.size() / 2);
  std::memcpy(words.data(), halves.data(), halves.size() * sizeof(uint16_t));
  REQUIRE(words.size() == t.buffer().size());
  t.buffer().copy_from_host(words);
  return t;
}

Tensor make_tensor(Shape s, const std::vector<float>& host, const Device& d, DType t) {
  return t == DType::BF16 ? make_bf16_tensor(s, host, d) : make_tensor(s, host, d);
}

std::vector<float> download_bf16(const Tensor& t) {
  REQUIRE(t.dtype() == DType::BF16);
  const std::vector<float> words = t.buffer().to_host();
  REQUIRE(words.size() * 2 >= t.numel());
  std::vector<uint16_t> halves(words.size() * 2);
  std::memcpy(halves.data(), words.data(), words.size() * sizeof(float));
  std::vector<float> v(t.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_float(halves[i]);
  return v;
}

namespace {

template <class T>
Comparison compare_values(const std::vector<T>& got, const std::vector<T>& ref) {
  Comparison c;
  if (got.size() != ref.size()) {
    c.same_size = false;
    c.rel_error = INFINITY;
    return c;
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = double(got[i]), r = double(ref[i]);
    const double e = std::isnan(g) || std::isnan(r) ? INFINITY : std::abs(g - r);
    c.max_ref = std::max(c.max_ref, std::abs(r));
    if (e > c.max_abs_error || (i == 0 && e == 0)) {
      c.max_abs_error = e;
      c.worst = i;
      c.got_at_worst = g;
      c.ref_at_worst = r;
    }
  }
  c.rel_error = c.max_abs_error == 0 ? 0 : c.max_abs_error / std::max(c.max_ref, 1e-30);
  return c;
}

}  // namespace

Comparison compare(const std::vector<float>& got, const std::vector<float>& ref) { return compare_values(got, ref); }
Comparison compare(const std::vector<double>& got, const std::vector<double>& ref) {
  return compare_values(got, ref);
}

std::string Comparison::describe(const std::string& what) const {
  std::ostringstream s;
  s.precision(9);
  if (!same_size) {
    s << what << ": sizes differ";
    return s.str();
  }
  s << what << ": max |got - ref| = " << max_abs_error << ", max |ref| = " << max_ref << ", relative "
    << rel_error << "; worst at index " << worst << ": got " << got_at_worst << ", ref " << ref_at_worst;
  return s.str();
}

void run_ranks(int ranks, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace trainer::testing
