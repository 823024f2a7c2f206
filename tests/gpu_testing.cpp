#include "gpu_testing.h"

#include <cmath>
#include <random>
#include <sstream>

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

}  // namespace trainer::testing
