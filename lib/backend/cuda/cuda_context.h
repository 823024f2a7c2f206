#pragma once
// CudaContext: one tower's execution context on one GPU (core/device.h's
// DeviceContext): a compute stream (every op of the tower is queued on it), a
// copy stream (input batches from pinned host memory), two communication
// streams (the gradient buckets' all-reduces; the collectives the compute
// stream waits for at once, at the GPU's highest stream priority, so that they
// pass the buckets), a cuDNN handle bound to the compute stream,
// a caching allocator (a step makes no cudaMalloc/cudaFree once warm) and a
// growing workspace shared by the tower's ops (safe: they run in stream order).
// Several contexts may share one GPU (towers --gpus 0,0). Internal to
// lib/backend/cuda; the rest of the code sees only DeviceContext.
//
// Errors: every CUDA, cuDNN and NCCL call goes through the CHECK
// macros below, which throw InternalError "<call> failed on cuda:<i> (layer
// '<name>'): <status>"; a failed allocation throws DeviceOutOfMemory.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/device.h"

namespace trainer::cuda {

class CudaContext final : public DeviceContext {
 public:
  /// Context on GPU `device` (CUDA ordinal) for convolutions in `precision`.
  /// Throws InternalError when the device or a library handle cannot be made.
  CudaContext(int device, Precision precision);
  /// Waits for the streams and frees every block (also those still held by
  /// Buffers: destroy the tower's tensors first), the handles and the streams;
  /// never throws.
  ~CudaContext() override;
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) noexcept override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* p, size_t bytes) override;
  void synchronize() override;
  void set_layer(const char* name) override { layer_ = name ? name : ""; }
  size_t peak_bytes() const override { return peak_; }
  void make_current() override;
  void* pinned_staging(size_t bytes) override;
  void upload_staged(void* dst, size_t bytes) override;
  void input_consumed() override;
  double take_input_wait_seconds() override;
  bool begin_recording() override;
  std::unique_ptr<DeviceGraph> end_recording(std::string& why) override;
  void defer_read_backs() override { deferring_ = true; }
  void finish_read_backs() override;
  void stop_deferring_read_backs() noexcept override;

  Precision precision() const { return precision_; }
  cudaStream_t stream() const { return compute_; }
  /// The gradient buckets' all-reduces (started during backward, waited for at the update).
  cudaStream_t comm_stream() const { return comm_; }
  /// Collectives the compute stream waits for at once (synchronized
  /// BatchNormalization's sums, broadcasts): their own stream, at the GPU's
  /// highest priority, so that they never queue behind a bucket in flight.
  cudaStream_t urgent_comm_stream() const { return urgent_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  /// Scratch of at least `bytes` on the device, valid until the next call
  /// (ops on the compute stream use it in turn).
  void* workspace(size_t bytes);
  /// Copies `bytes` from device memory `src` to host memory `dst` once the
  /// compute stream's queued work has made them: through the context's
  /// pinned read-back buffer (a copy from pageable memory would go through the
  /// driver's own staging, which can wait on other threads' allocations and
  /// cuDNN calls), then waits for the compute stream. Throws InternalError.
  void read_back(void* dst, const void* src, size_t bytes);
  /// Copies `bytes` from device memory `src` into the pinned read-back
  /// buffer once the compute stream's queued work has made them, and calls
  /// `deliver` with them (host memory, valid during the call): before
  /// returning (waiting for the compute stream), or, while read-backs are
  /// deferred (DeviceContext::defer_read_backs), in finish_read_backs.
  /// Throws InternalError.
  void read_back_then(const void* src, size_t bytes, std::function<void(const void*)> deliver);

  /// Throws InternalError "<call> failed on cuda:<i>[ (layer '<name>')]: <status>".
  [[noreturn]] void fail(const char* call, const std::string& status) const;

 private:
  friend class CudaGraph;
  /// A cached block of at least `size` bytes (at most twice that) from
  /// `cache`, removed from it, with its size in `block`; null when none fits.
  static void* take_cached(std::multimap<size_t, void*>& cache, size_t size, size_t& block);
  /// Moves handed-out block p to `cache`; aborts on a block it did not hand out.
  void release_block(void* p, std::multimap<size_t, void*>& cache) noexcept;
  /// A graph of this context is destroyed (cuda_graph.cpp): with the last
  /// one, the graphs' pool goes back to the cache.
  void graph_destroyed() noexcept;
  /// With no graph live and none recording, moves the graphs' pool to the cache.
  void return_graph_pool() noexcept;
  /// cudaMalloc of `bytes`; on cudaErrorMemoryAllocation synchronizes, frees
  /// the cached blocks and retries once, then throws DeviceOutOfMemory.
  void* device_malloc(size_t bytes);
  /// cudaFree of every cached (unused) block.
  void free_cached();
  /// The DeviceOutOfMemory text for a failed request of `bytes`.
  std::string out_of_memory_message(size_t bytes) const;
  /// Waits for the streams and frees every block, handle and stream, ignoring
  /// errors (destructor and failed constructor).
  void release() noexcept;

  int device_;
  Precision precision_;
  cudaStream_t compute_ = nullptr, copy_ = nullptr, comm_ = nullptr, urgent_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  std::string layer_;
  std::multimap<size_t, void*> free_;      ///< Cached blocks by size.
  /// Blocks freed while recording or while graphs live (the workspace): the
  /// graphs' pool. Recording takes from it first; other work never does, so
  /// no block a graph writes is ever lent outside the graphs.
  std::multimap<size_t, void*> graph_free_;
  bool recording_ = false;                 ///< Between begin_recording and end_recording.
  int graphs_ = 0;                         ///< Live CudaGraphs of this context.
  std::unordered_map<void*, size_t> live_;  ///< Handed-out blocks and their sizes.
  size_t in_use_ = 0, peak_ = 0;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  // Input staging (cuda_context_staging.cpp).
  void* pinned_ = nullptr;                 ///< Pinned host buffer (cudaHostAlloc).
  size_t pinned_bytes_ = 0;
  cudaEvent_t uploaded_ = nullptr;         ///< Recorded on the copy stream after each upload.
  cudaEvent_t consumed_ = nullptr;         ///< Recorded on the compute stream by input_consumed().
  bool uploading_ = false;                 ///< uploaded_ has been recorded.
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> waits_, spare_waits_;  ///< Timing events around each wait.
  double waited_seconds_ = 0;              ///< Waits already collected from waits_.
  static constexpr size_t kMaxPendingWaits = 64;
  void* readback_ = nullptr;               ///< Pinned host buffer of read_back.
  size_t readback_bytes_ = 0;
  size_t readback_used_ = 0;               ///< Bytes of readback_ holding undelivered read-backs.
  /// A read-back queued while deferring: where its bytes land, and what takes them.
  struct PendingReadBack {
    const void* host;
    std::function<void(const void*)> deliver;
  };
  std::vector<PendingReadBack> pending_;   ///< Deferred read-backs, in the order queued.
  bool deferring_ = false;                 ///< Between defer_read_backs and stop_deferring_read_backs.
  cudaEvent_t read_backs_done_ = nullptr;  ///< Recorded on the compute stream after each deferred copy.
  /// A slot of `bytes` in the pinned read-back buffer after the undelivered
  /// ones (a larger buffer when they do not fit: the old one is kept, with
  /// what is still to land in it).
  void* read_back_slot(size_t bytes);
  std::vector<void*> retired_readbacks_;   ///< Outgrown read-back buffers, freed with the context.
  /// Destroys the staging buffer and events, ignoring errors (release()).
  void release_staging() noexcept;
};

/// The CudaContext of a CUDA device.
inline CudaContext& context(const Device& d) { return static_cast<CudaContext&>(*d.ctx); }

/// Status strings of the libraries.
std::string status_string(cudaError_t e);
std::string status_string(cudnnStatus_t e);

}  // namespace trainer::cuda

/// Checks a CUDA runtime / cuDNN call made for context ctx (a CudaContext&).
#define TRAINER_CUDA_CHECK(ctx, call)                                                      \
  do {                                                                                     \
    auto trainer_status_ = (call);                                                         \
    if (trainer_status_ != decltype(trainer_status_){})                                    \
      (ctx).fail(#call, ::trainer::cuda::status_string(trainer_status_));                  \
  } while (0)
/// Checks the last kernel launch (kernel_name: a string literal) on ctx.
#define TRAINER_CUDA_CHECK_LAUNCH(ctx, kernel_name)                              \
  do {                                                                           \
    cudaError_t trainer_status_ = cudaGetLastError();                            \
    if (trainer_status_ != cudaSuccess)                                          \
      (ctx).fail(kernel_name " launch", ::trainer::cuda::status_string(trainer_status_)); \
  } while (0)
