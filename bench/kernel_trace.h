#pragma once
// KernelTrace (bench tools, CUDA builds): every GPU kernel, copy and memset
// the process runs while one exists, recorded with CUPTI's activity API (the
// CUDA toolkit's tracing library, under Nsight Systems and torch.profiler), so
// that a training step's GPU time can be split by kernel and its idle gaps
// measured where Nsight Systems is not installed (the lent GPU machine).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace trainer::bench {

/// One record: a kernel (its demangled name), a copy or a memset, with its
/// GPU timestamps (ns).
struct TraceRecord {
  std::string name;
  uint64_t start = 0, end = 0;
};

class KernelTrace {
 public:
  /// Starts recording on every GPU. At most one at a time per process;
  /// std::runtime_error naming the CUPTI call when CUPTI refuses (no GPU, or
  /// another tracer such as a profiler attached).
  KernelTrace();
  /// Stops recording (errors ignored).
  ~KernelTrace();
  KernelTrace(const KernelTrace&) = delete;
  KernelTrace& operator=(const KernelTrace&) = delete;

  /// Waits for every GPU of the process (cudaDeviceSynchronize; errors are
  /// left to the next call that checks), stops recording and describes what
  /// was recorded, per step (divided by
  /// `steps` >= 1): the span from the first start to the last end, the time
  /// some kernel, copy or memset ran (the union over all streams) and the
  /// rest (idle); kernel time split into convolution kernels (cuDNN/CUTLASS
  /// names: xmma, gemm, fprop, dgrad, wgrad, convolution, as
  /// bench/torch_profile.py counts PyTorch's) and the others; then the `top`
  /// kernels by time (ms per step, calls per step, name).
  std::string report(int steps, int top);

  /// Appends a record (CUPTI's buffer callback, from its own thread).
  void add(TraceRecord r);
  /// Counts records CUPTI dropped (full buffers); the report warns of them.
  void add_dropped(size_t n);

 private:
  void stop();
  std::mutex mu_;
  std::vector<TraceRecord> records_;
  std::atomic<size_t> dropped_{0};
  bool running_ = false;
};

}  // namespace trainer::bench
