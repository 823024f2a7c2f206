#pragma once
// Device: where a tower's tensors live and its ops run. A CPU device needs
// nothing else; a CUDA device carries its tower's DeviceContext (streams,
// library handles, caching allocator), which backend/cuda implements. Layers
// never branch on the device: they pass ctx.device to the backend, which
// dispatches (as dlib's tt:: functions do).
#include <cstddef>
#include <memory>
#include <string>

namespace trainer {

enum class DeviceKind { CPU, CUDA };

/// Arithmetic of the convolutions (config key training.precision): fp32:
/// IEEE fp32 throughout; tf32 (GPUs only; CPU towers compute fp32): tensor
/// cores in TF32 (10-bit mantissa inputs, fp32 accumulation); bf16:
/// convolutions with bf16 inputs and fp32 accumulation, fp32 master weights,
/// fp32 optimizer state, fp32 loss and metrics, and the activations between
/// the layers that take them stored in bf16 (core/dtype.h); on a CPU, with
/// AVX512-BF16 or AMX through oneDNN, every convolution oneDNN has a bf16
/// kernel for computes in bf16, rounding an fp32 input as it reads it.
enum class Precision { FP32, TF32, BF16 };

/// "fp32" | "tf32" | "bf16".
const char* precision_name(Precision p);
/// The precision precision_name() calls `name` ("fp32", "tf32", "bf16"); FP32
/// for any other name (callers check the name against the three first).
Precision precision_named(const std::string& name);

/// Work recorded on a tower's compute stream (DeviceContext::begin_recording),
/// replayed as one launch: the same kernels with the same arguments and
/// addresses. Destroy it before its context.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  /// Queues the recorded work on the compute stream. Throws InternalError.
  virtual void replay() = 0;
};

/// Execution context of one tower on one GPU, implemented by backend/cuda
/// (CudaContext). Several towers may share a GPU, each with its own context.
/// Memory functions are ordered on the context's compute stream.
class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  /// Device memory of `bytes` from the context's caching allocator (no
  /// cudaMalloc once the cache holds a block of that size). Throws
  /// DeviceOutOfMemory when the device cannot provide it.
  virtual void* allocate(size_t bytes) = 0;
  /// Returns p (from allocate(bytes)) to the cache.
  virtual void deallocate(void* p, size_t bytes) noexcept = 0;
  /// Copies bytes between any two of {host, this device} (cudaMemcpyDefault),
  /// ordered on the compute stream; returns once a host destination holds the data.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  /// Sets bytes to zero, ordered on the compute stream.
  virtual void zero(void* p, size_t bytes) = 0;
  /// Waits for all work queued on the context's streams. Throws InternalError on a device error.
  virtual void synchronize() = 0;
  /// Binds the calling host thread to this context's GPU (cudaSetDevice); a
  /// tower's thread calls it before queuing work.
  virtual void make_current() = 0;
  /// Names the layer now queuing work, for error messages ("" outside layers).
  virtual void set_layer(const char* name) = 0;
  /// Input pipeline. A pinned host buffer of at least `bytes` for the tower's
  /// next shard; waits until the previous upload from it has finished. Valid
  /// until the next call.
  virtual void* pinned_staging(size_t bytes) = 0;
  /// Copies `bytes` from the pinned staging buffer to dst on the copy stream,
  /// once the compute stream has read dst's previous contents (input_consumed),
  /// and makes the compute stream wait for the copy; the time it waits is
  /// measured (take_input_wait_seconds).
  virtual void upload_staged(void* dst, size_t bytes) = 0;
  /// Marks, on the compute stream, that the last upload's destination has been read.
  virtual void input_consumed() = 0;
  /// Seconds the compute stream waited for uploads since the last call
  /// (waits for the queued work to measure it).
  virtual double take_input_wait_seconds() = 0;
  /// Peak bytes held by this context's allocator since creation.
  virtual size_t peak_bytes() const = 0;
  /// Starts recording the work this thread queues on the compute stream into
  /// a graph (CUDA stream capture) instead of running it; false where the
  /// context cannot record. While recording, memory freed goes to a pool kept
  /// for the context's graphs (never handed to work outside them), and
  /// nothing may wait for the device (a wait ends the recording in failure).
  virtual bool begin_recording() { return false; }
  /// Ends the recording begun by begin_recording(). Returns the graph, which
  /// has not run yet, or null when the recording failed: the work queued
  /// since begin_recording() did not run and `why` says what failed. Never
  /// throws for a failed recording.
  virtual std::unique_ptr<DeviceGraph> end_recording(std::string& why) {
    why = "this device records no graphs";
    return nullptr;
  }
  /// Deferred read-backs. An op that returns values to the host (the
  /// loss's sums, the metrics' counts: backend/train_ops.inc says which)
  /// waits for the device at each call, unless read-backs are deferred:
  /// then it queues its copy and returns at once, and its values reach the
  /// host memory it was given in finish_read_backs(), which waits for the
  /// device once and delivers them in the order queued. So a training step
  /// queues its backward pass before it reads its loss, and the device does
  /// not wait for the host between them. That host memory must stay valid
  /// until the values are delivered. The default, for contexts with nothing
  /// to wait for: every read-back is at once.
  virtual void defer_read_backs() {}
  /// Delivers the read-backs queued so far (waiting for the device once);
  /// read-backs stay deferred. Throws InternalError on a device error.
  virtual void finish_read_backs() {}
  /// Ends the deferral, dropping the read-backs not yet delivered (after a
  /// failed step: their host memory is not written).
  virtual void stop_deferring_read_backs() noexcept {}
};

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = -1;                 ///< CUDA ordinal; -1 for the CPU.
  DeviceContext* ctx = nullptr;   ///< The tower's context; non-null for CUDA.
  /// What the tower's convolutions compute in: training.precision, except
  /// FP32 on a CPU without bf16 arithmetic and for tf32 on a CPU (a CUDA
  /// backend reads its context's, the same).
  Precision precision = Precision::FP32;
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  /// "cpu" or "cuda:<index>".
  std::string str() const { return is_cuda() ? "cuda:" + std::to_string(index) : "cpu"; }
  /// Same kind, ordinal and context (towers sharing a GPU have distinct contexts).
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index && ctx == o.ctx; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

/// DeviceContext::finish_read_backs of d's context (a CPU device has none: its ops' values are there at once).
inline void finish_read_backs(const Device& d) {
  if (d.ctx) d.ctx->finish_read_backs();
}

/// Defers d's read-backs (DeviceContext::defer_read_backs) from construction
/// to finish(), which delivers them; a scope left before finish() (an
/// exception) drops them. Nothing to do for a device without a context.
/// Does not nest: an inner one's end ends the outer deferral too.
class DeferredReadBacks {
 public:
  explicit DeferredReadBacks(const Device& d) : ctx_(d.ctx) {
    if (ctx_) ctx_->defer_read_backs();
  }
  ~DeferredReadBacks() {
    if (ctx_) ctx_->stop_deferring_read_backs();
  }
  DeferredReadBacks(const DeferredReadBacks&) = delete;
  DeferredReadBacks& operator=(const DeferredReadBacks&) = delete;
  /// Delivers the deferred read-backs and ends the deferral. Throws InternalError on a device error.
  void finish() {
    if (!ctx_) return;
    DeviceContext* c = ctx_;
    ctx_ = nullptr;
    try {
      c->finish_read_backs();
    } catch (...) {
      c->stop_deferring_read_backs();
      throw;
    }
    c->stop_deferring_read_backs();
  }

 private:
  DeviceContext* ctx_;
};

}  // namespace trainer
