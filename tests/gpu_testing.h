#pragma once
// Helpers for the GPU tests (tag "[gpu]"): whether a CUDA GPU is visible, the
// skip at the start of each GPU test case, a CUDA Device that owns its
// context, host <-> device copies through Buffer / Tensor, and the comparison
// of a device result with the CPU reference (dlib's and llm.c's pattern: the
// CPU implementation is the oracle, compared at a stated tolerance), and the
// host side of bf16 tensors (core/dtype.h): rounding to bf16 and back, upload
// and download, in plain bit manipulation (no CUDA header, so that a build
// without CUDA compiles them too).
//
// Without a GPU, or in a build without the CUDA backend (TRAINER_WITH_CUDA
// undefined), every GPU test compiles and skips with a Catch2 warning.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/buffer.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace trainer::testing {

/// Whether list_gpus() finds at least one CUDA GPU (false in a build without CUDA).
bool gpu_available();

/// "skipped: no CUDA GPU visible (built with CUDA: yes|no)".
std::string gpu_skip_message();

/// One tower's CUDA Device on GPU `index`, owning its context
/// (make_gpu_context from backend/gpu_info.h); use `.device`. Throws
/// InternalError when the device cannot be initialised or the build has no CUDA.
/// Declare it before the tensors and buffers that live on it (they must go first).
struct GpuDevice {
  GpuDevice(int index, Precision precision);
  GpuDevice(const GpuDevice&) = delete;
  GpuDevice& operator=(const GpuDevice&) = delete;
  std::unique_ptr<DeviceContext> ctx;
  Device device;
};

/// n values drawn uniformly in [lo, hi) from seed (std::mt19937).
std::vector<float> random_values(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f);

/// A tensor of shape s on device d holding host (s.numel() values).
Tensor make_tensor(Shape s, const std::vector<float>& host, const Device& d);

// ---- bf16 on the host (float_to_bf16, bf16_to_float, round_bf16: core/bf16.h) ---

using trainer::round_bf16;  // the float overload beside the vector one below

/// Every value of v rounded to bf16, as floats (the host inputs of a CPU
/// reference that should see what a bf16 tensor holds).
std::vector<float> round_bf16(std::vector<float> v);

/// A bf16 tensor (set_dtype(DType::BF16)) of shape s on device d holding host
/// (s.numel() values, each rounded to bf16 as float_to_bf16): the packed
/// elements, two per 4-byte word in address order, a last odd element's word
/// padded with bf16 zero, uploaded by buffer().copy_from_host.
Tensor make_bf16_tensor(Shape s, const std::vector<float>& host, const Device& d);
/// make_tensor (fp32) or make_bf16_tensor, by t.
Tensor make_tensor(Shape s, const std::vector<float>& host, const Device& d, DType t);
/// The numel() elements of a bf16 tensor t (on any device) as floats (exact).
std::vector<float> download_bf16(const Tensor& t);

/// A buffer of host.size() values on device d holding host.
template <class T>
Buffer<T> upload(const std::vector<T>& host, const Device& d) {
  Buffer<T> b(d);
  b.copy_from_host(host);
  return b;
}

/// The contents of a tensor (on any device) as host values (a bf16 tensor's
/// elements widened to float, as download_bf16).
inline std::vector<float> download(const Tensor& t) {
  return t.dtype() == DType::BF16 ? download_bf16(t) : t.buffer().to_host();
}
template <class T>
std::vector<T> download(const Buffer<T>& b) {
  return b.to_host();
}

/// Result of comparing a device result with its reference.
struct Comparison {
  double max_abs_error = 0;  ///< max_i |got[i] - ref[i]|.
  double max_ref = 0;        ///< max_i |ref[i]|.
  double rel_error = 0;      ///< max_abs_error / max(max_ref, 1e-30); 0 when both are all zero.
  size_t worst = 0;          ///< Index of the largest |got - ref|.
  double got_at_worst = 0, ref_at_worst = 0;
  bool same_size = true;     ///< false when the sizes differ (then rel_error is infinite).
  /// One line for Catch's INFO: sizes, errors and the worst index with both values.
  std::string describe(const std::string& what) const;
};

/// max |got - ref| relative to max |ref| (the scale of the tensor, so that
/// values near zero do not dominate), with the index where it is largest.
/// NaN anywhere in got counts as an infinite error.
Comparison compare(const std::vector<float>& got, const std::vector<float>& ref);
Comparison compare(const std::vector<double>& got, const std::vector<double>& ref);

/// Index of the first element where a and b differ, or -1 when equal (sizes too).
template <class T>
long long first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return (long long)i;
  return -1;
}

// ---- several ranks on their own threads ----------------------------------------

/// Runs fn(rank) on one thread per rank, as each tower has its own (collectives block until every rank
/// arrives), and rethrows the first exception. fn must not use Catch macros (they are not thread-safe): it
/// stores results for the main thread to check.
void run_ranks(int ranks, const std::function<void(int)>& fn);

/// A device buffer of a tower, filled from and read back to the host.
template <typename T>
struct DeviceBuffer {
  DeviceContext& ctx;
  size_t n;
  T* p;
  DeviceBuffer(DeviceContext& c, const std::vector<T>& host)
      : ctx(c), n(host.size()), p(static_cast<T*>(c.allocate(n * sizeof(T)))) {
    ctx.copy(p, host.data(), n * sizeof(T));
  }
  ~DeviceBuffer() { ctx.deallocate(p, n * sizeof(T)); }
  std::vector<T> read() {
    std::vector<T> h(n);
    ctx.copy(h.data(), p, n * sizeof(T));
    return h;
  }
};

}  // namespace trainer::testing

/// First statement of every GPU test case: without a visible CUDA GPU, a
/// Catch2 warning "skipped: no CUDA GPU visible (built with CUDA: yes|no)" and
/// return (Catch2 2.13 has no SKIP).
#define TRAINER_REQUIRE_GPU()                                          \
  do {                                                                 \
    if (!::trainer::testing::gpu_available()) {                        \
      WARN(::trainer::testing::gpu_skip_message());                    \
      return;                                                          \
    }                                                                  \
  } while (0)

/// CHECK that got (a host vector) matches ref within rel_tol relative to
/// max |ref|; on failure Catch prints what, both errors and the worst index.
#define CHECK_CLOSE(what, got, ref, rel_tol)                                    \
  do {                                                                          \
    const auto trainer_cmp_ = ::trainer::testing::compare((got), (ref));        \
    INFO(trainer_cmp_.describe(what) << " (tolerance " << (rel_tol) << ")");    \
    CHECK(trainer_cmp_.rel_error <= (rel_tol));                                 \
  } while (0)

/// CHECK that got and ref are identical element for element; on failure Catch
/// prints what and the first index that differs with both values.
#define CHECK_IDENTICAL(what, got, ref)                                                        \
  do {                                                                                         \
    const auto& trainer_got_ = (got);                                                          \
    const auto& trainer_ref_ = (ref);                                                          \
    const long long trainer_at_ = ::trainer::testing::first_difference(trainer_got_, trainer_ref_); \
    INFO((what) << ": sizes " << trainer_got_.size() << " / " << trainer_ref_.size()           \
                << ", first difference at " << trainer_at_                                      \
                << (trainer_at_ >= 0 && size_t(trainer_at_) < trainer_got_.size() &&          \
                            size_t(trainer_at_) < trainer_ref_.size()                          \
                        ? ": got " + std::to_string(+trainer_got_[size_t(trainer_at_)]) +      \
                              ", ref " + std::to_string(+trainer_ref_[size_t(trainer_at_)])    \
                        : std::string()));                                                     \
    CHECK(trainer_at_ == -1);                                                                  \
  } while (0)
